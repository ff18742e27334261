package server

import (
	"errors"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/seed7fbd42b6/ratelimit/cmd/ratelimitd/internal/engine"
)

// A JSON body with more objects than the most descriptors and entries
// allowed, nested too deep, with a lone surrogate or invalid UTF-8 is
// refused before decoding; what is inside strings does not count.
func TestScanJSON(t *testing.T) {
	s, _ := newTestServer(t, testRules)
	most := s.requestObjects()
	if want := 1 + s.limits.MaxDescriptors*(s.limits.MaxEntries+2); most != want {
		t.Fatalf("requestObjects = %d, want %d", most, want)
	}
	entry := func(v string) string {
		return `{"domain":"d","descriptors":[{"entries":[{"key":"a","value":"` + v + `"}]}]}`
	}
	descriptors := func(n int) string {
		return `{"domain":"d","descriptors":[` + strings.TrimSuffix(strings.Repeat(`{},`, n), ",") + `]}`
	}
	for _, c := range []struct {
		name string
		body string
		ok   bool
	}{
		{"a request", `{"domain":"d","descriptors":[{"entries":[{"key":"a","value":"x"}]}]}`, true},
		{"as many objects as allowed", descriptors(most - 1), true},
		{"one more", descriptors(most), false},
		{"braces in a string", `{"domain":"d","descriptors":[{"entries":[{"key":"a","value":"` + strings.Repeat(`{\"{`, most) + `"}]}]}`, true},
		{"ten thousand descriptors", descriptors(10000), false},
		{"an override, five levels deep", `{"domain":"d","descriptors":[{"entries":[{"key":"a"}],"limit":{"unit":"SECOND"}}]}`, true},
		{"objects nested deeper than 8", `{"a":{"a":{"a":{"a":{"a":{"a":{"a":{"a":{"a":1}}}}}}}}}`, false},
		{"objects nested 8 deep", `{"a":{"a":{"a":{"a":{"a":{"a":{"a":{"a":1}}}}}}}}`, true},
		{"arrays in an array", `{"domain":"d","descriptors":[[]]}`, false},
		{"a megabyte of [", `{"descriptors":` + strings.Repeat("[", 1<<20), false},
		{"an array of nulls", `{"domain":"d","descriptors":[null,null,null]}`, false},
		{"an object, then nulls", `{"domain":"d","descriptors":[{}, null]}`, false},
		{"an array of numbers", `{"domain":"d","descriptors":[0,0]}`, false},
		{"an array of strings", `{"domain":"d","descriptors":["x"]}`, false},
		{"entries of nulls", `{"domain":"d","descriptors":[{"entries":[null]}]}`, false},
		{"empty arrays, white space", "{\"domain\":\"d\",\"descriptors\":[ \n ], \"x\": [\t{ } ,\r\n{}]}", true},
		{"brackets in a string", entry(strings.Repeat(`[[\"[`, 100)), true},
		{"a surrogate pair", entry(`\ud83d\ude00`), true},
		{"escapes around a pair", entry(`\n\ud83d\ude00\u0041\\u`), true},
		{"a lone high surrogate", entry(`\ud800`), false},
		{"a high one at the end", entry(`x\uDBFF`), false},
		{"a high one before a letter", entry(`\ud800x`), false},
		{"a high one before another escape", entry(`\ud800\n`), false},
		{"two high ones", entry(`\ud800\ud800`), false},
		{"a lone low surrogate", entry(`\udc00`), false},
		{"a lone surrogate in a key", `{"domain":"d","descriptors":[{"entries":[{"k\udfff":"a"}]}]}`, false},
		{"an escaped backslash before u", entry(`\\ud800`), true},
		{"invalid UTF-8", entry("\xff"), false},
		{"a syntax error", `{"domain":"d","descriptors":[{"entries":[{"key":"\u12`, true}, // the decoder's to report
	} {
		err := scanJSON([]byte(c.body), most)
		if (err == nil) != c.ok || err != nil && !errors.Is(err, engine.ErrInvalidRequest) {
			t.Errorf("%s: %v, want ok %v", c.name, err, c.ok)
		}
		w := httptest.NewRecorder()
		if got := checkJSON(w, []byte(c.body), most); got != c.ok || !c.ok && w.Code != http.StatusBadRequest {
			t.Errorf("%s: checkJSON %v (%d), want %v", c.name, got, w.Code, c.ok)
		}
	}
	// Limits whose product overflows an int bound nothing, rather than
	// refusing everything.
	s.limits.MaxDescriptors = 1 << 62
	if err := scanJSON([]byte(descriptors(3)), s.requestObjects()); err != nil {
		t.Errorf("with -max-descriptors 2^62: %v", err)
	}
	s.limits.MaxEntries = math.MaxInt
	if got := s.bucketObjects(); got != math.MaxInt {
		t.Errorf("bucketObjects with -max-entries MaxInt = %d", got)
	}
}

// Native and admin requests take field names exactly as written, once.
func TestExactKeys(t *testing.T) {
	for _, c := range []struct {
		body string
		ok   bool
	}{
		{`{"domain":"api","descriptors":[{"entries":[{"key":"K","value":"V"}],"hits":2}],"reserve":true}`, true},
		{`{"domain":"api","Domain":"x","descriptors":[]}`, false},
		{`{"domain":"api","domain":"x"}`, false},
		{`{"descriptors":[{"entries":[{"Key":"a","value":"b"}]}]}`, false},
		{`{"descriptors":[{"entries":[{"key":"a","key":"b"}]}]}`, false},
		{`{"descriptors":[{"entries":[{"key":"a"}]},{"entries":[{"key":"a"}]}]}`, true},                       // one key per object
		{`{"domain":"api","descriptors":[{"entries":[{"key":"a","value":"b"}]}],"re\u017ferve":true}`, false}, // ſ folds to s
		{"{\"domain\":\"api\",\"reſerve\":true}", false},
		{`{"domain":"api","max_reserved":1}`, true},
		{`{"domain":"api","Reserve":true}`, false},
		{`{"domain":"api","re-serve":true}`, false},
		{`{"a":1,"b":1,"c":1,"d":1,"e":1,"f":1,"g":1,"h":1}`, true}, // eight fields: unknown ones are the decoder's to refuse
		{`{"a":1,"b":1,"c":1,"d":1,"e":1,"f":1,"g":1,"h":1,"i":1}`, false},
		{`{"descriptors":[{"a":1,"b":1,"c":1,"d":1,"e":1,"f":1,"g":1,"h":1},{"a":1,"b":1,"c":1,"d":1,"e":1,"f":1,"g":1,"h":1}]}`, true},
		{`{"domain":"api",`, true}, // a syntax error: the decoder's to report
	} {
		if err := exactKeys([]byte(c.body)); c.ok != (err == nil) {
			t.Errorf("%s: %v, want ok %v", c.body, err, c.ok)
		}
	}
}

// decodeJSON takes one JSON value and nothing after it but white space:
// closing brackets included, which json.Decoder.More does not see.
func TestDecodeJSONRefusesTrailingData(t *testing.T) {
	for _, c := range []struct {
		body string
		ok   bool
	}{
		{`{"domain":"api"}`, true},
		{"{\"domain\":\"api\"} \r\n\t", true},
		{`{"domain":"api"}}`, false},
		{`{"domain":"api"}]}}garbage`, false},
		{`{"domain":"api"} {"domain":"x"}`, false},
		{`{"domain":"api"}x`, false},
	} {
		var v struct {
			Domain string `json:"domain"`
		}
		rec := httptest.NewRecorder()
		if got := decodeJSON(rec, []byte(c.body), 1, &v); got != c.ok {
			t.Errorf("%q: decoded %v (%d %s), want %v", c.body, got, rec.Code, rec.Body, c.ok)
		}
	}
}
