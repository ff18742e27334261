package server

import (
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// An answer JSON cannot carry is a 500 with a reason, never a 200 with
// an empty body.
func TestWriteJSONOfTheUnwritable(t *testing.T) {
	rec := httptest.NewRecorder()
	writeJSON(rec, http.StatusOK, map[string]any{"metadata": math.Inf(1)})
	if rec.Code != http.StatusInternalServerError || !strings.Contains(rec.Body.String(), "cannot be written as JSON") {
		t.Errorf("got %d %q, want a 500 saying why", rec.Code, rec.Body)
	}
	rec = httptest.NewRecorder()
	writeJSON(rec, http.StatusCreated, map[string]int{"a": 1})
	if rec.Code != http.StatusCreated || rec.Body.String() != "{\"a\":1}\n" {
		t.Errorf("got %d %q", rec.Code, rec.Body)
	}
}
