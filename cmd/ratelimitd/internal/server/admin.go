package server

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/seed7fbd42b6/ratelimit"
	"github.com/seed7fbd42b6/ratelimit/cmd/ratelimitd/internal/engine"
)

// newAdminHandler routes the admin port: operator actions, the loaded
// configuration, health, metrics and profiles.
func (s *Server) newAdminHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/v1/credit", s.handleCredit)
	mux.HandleFunc("/v1/reset", s.handleReset)
	mux.HandleFunc("/v1/backup", s.handleBackup)
	mux.HandleFunc("/v1/salvage", s.handleSalvage)
	mux.HandleFunc("/v1/reload", s.handleReload)
	mux.HandleFunc("/v1/config", s.handleConfig)
	mux.HandleFunc("/healthcheck", s.handleHealthcheck)
	mux.Handle("/metrics", s.metricsHandler())
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	return noBrowsers(mux, s.opts.AdminHosts)
}

// noBrowsers refuses (403) requests that a web browser sent on a page's
// behalf (they carry Origin, or Sec-Fetch-Site other than none), and
// requests addressed (Host) to a name other than localhost or one of
// hosts: the admin API is for operators' tools, and a page the operator
// happens to open must not reach it, neither by cross-site requests nor
// by a name of its own rebound to the admin address (DNS rebinding, which
// browsers that send no Sec-Fetch-Site would treat as same-origin). IP
// addresses always pass: a browser sends one only where the page's own
// address is one, which no rebinding can give.
func noBrowsers(h http.Handler, hosts []string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if site := r.Header.Get("Sec-Fetch-Site"); r.Header.Get("Origin") != "" || site != "" && site != "none" {
			writeError(w, http.StatusForbidden, errors.New("the admin API does not serve requests from web pages"))
			return
		}
		if !adminHost(r.Host, hosts) {
			writeError(w, http.StatusForbidden, fmt.Errorf("the admin API does not answer requests addressed to %q: use an IP address or localhost, or list the name in -admin-hosts", r.Host))
			return
		}
		h.ServeHTTP(w, r)
	})
}

// adminHost reports whether a request whose Host header is host may reach
// the admin API: an IP address, localhost, a name in hosts (case aside),
// or no Host at all (HTTP/1.0, which no browser sends).
func adminHost(host string, hosts []string) bool {
	if host == "" {
		return true
	}
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.TrimSuffix(strings.TrimPrefix(host, "["), "]"), ".")
	if _, err := netip.ParseAddr(host); err == nil || strings.EqualFold(host, "localhost") {
		return true
	}
	for _, h := range hosts {
		if strings.EqualFold(host, strings.TrimSuffix(h, ".")) {
			return true
		}
	}
	return false
}

// handleCredit gives count tokens back to a descriptor's bucket.
func (s *Server) handleCredit(w http.ResponseWriter, r *http.Request) {
	in, ok := s.readBucketRequest(w, r, true)
	if !ok {
		return
	}
	if !(in.Count > 0) {
		writeError(w, http.StatusBadRequest, fmt.Errorf("%w: count must be > 0", engine.ErrInvalidRequest))
		return
	}
	ctx, cancel := s.deadline(r.Context())
	defer cancel()
	b, err := s.eng.Credit(ctx, in.Domain, entries(in.Entries), in.Count)
	s.adminAnswer(w, "credit", b, err, slog.Float64("count", in.Count))
}

// handleReset makes a descriptor's bucket full again.
func (s *Server) handleReset(w http.ResponseWriter, r *http.Request) {
	in, ok := s.readBucketRequest(w, r, false)
	if !ok {
		return
	}
	ctx, cancel := s.deadline(r.Context())
	defer cancel()
	b, err := s.eng.Reset(ctx, in.Domain, entries(in.Entries))
	s.adminAnswer(w, "reset", b, err)
}

func (s *Server) adminAnswer(w http.ResponseWriter, action string, b engine.Bucket, err error, attrs ...any) {
	if err != nil {
		_, _, code := classify(err)
		writeError(w, code, err)
		return
	}
	s.log.Info("admin "+action, append([]any{slog.String("limit", b.Limit.Name), slog.String("key", b.Key)}, attrs...)...)
	writeJSON(w, http.StatusOK, bucketOf(b))
}

// errNoFile: an admin action that needs the limiter's file, on storage
// without one.
var errNoFile = errors.New("not available on this storage")

// handleBackup sends a consistent copy of the limiter's file
// (ratelimit.Limiter.Backup), made beside it first (a hidden file, removed
// once sent); it opens as a limiter's file holding every grant
// acknowledged before the backup began. A failure after the first bytes
// aborts the response, so a truncated copy is never mistaken for a whole
// one.
func (s *Server) handleBackup(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodPost {
		w.Header().Set("Allow", "GET, POST")
		writeError(w, http.StatusMethodNotAllowed, fmt.Errorf("%s not allowed", r.Method))
		return
	}
	if !s.opts.Storage.hasFile() {
		where := "in memory"
		if s.opts.Storage.Redis != nil {
			where = "on Redis (back Redis up with its own tools: its append-only file)"
		}
		writeError(w, http.StatusConflict, fmt.Errorf("%w: no file to back up: the limiter keeps its buckets %s", errNoFile, where))
		return
	}
	// The copy goes to a file beside the live one first, then to the
	// client: Backup holds a read transaction of the live file while it
	// copies, and a commit that must map the growing file anew waits for
	// it, so a client that reads slowly, or stops, must not hold it.
	f, err := os.CreateTemp(filepath.Dir(s.opts.Storage.Data), ".ratelimitd-backup-*")
	if err != nil {
		writeError(w, http.StatusServiceUnavailable, fmt.Errorf("backup: %w", err))
		return
	}
	defer func() { f.Close(); os.Remove(f.Name()) }()
	n, err := s.eng.Limiter().Backup(f)
	if err == nil {
		_, err = f.Seek(0, io.SeekStart)
	}
	if err != nil {
		s.log.Error("admin backup failed", slog.Int64("bytes", n), slog.Any("err", err))
		writeError(w, http.StatusServiceUnavailable, err)
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Disposition", `attachment; filename="ratelimit-backup.db"`)
	w.Header().Set("Content-Length", strconv.FormatInt(n, 10))
	if _, err := io.Copy(w, f); err != nil {
		s.log.Error("admin backup: sending it failed", slog.Int64("bytes", n), slog.Any("err", err))
		panic(http.ErrAbortHandler)
	}
	s.log.Info("admin backup", slog.Int64("bytes", n))
}

// handleSalvage reads what can be read of a damaged limiter file (src)
// into a new one (dst), both paths on the server, and reports what was
// lost (ratelimit.Salvage). The live file cannot be salvaged while it is
// open: salvage a copy.
func (s *Server) handleSalvage(w http.ResponseWriter, r *http.Request) {
	body, ok := s.readBody(w, r)
	var in struct {
		Src string `json:"src"`
		Dst string `json:"dst"`
	}
	if !ok || !decodeJSON(w, body, 1, &in) {
		return
	}
	if s.opts.Storage.Redis != nil {
		writeError(w, http.StatusConflict, fmt.Errorf("%w: salvage reads limiter files; this ratelimitd keeps its buckets on Redis (use ratelimitd salvage FILE NEW on a file)", errNoFile))
		return
	}
	if in.Src == "" || in.Dst == "" {
		writeError(w, http.StatusBadRequest, errors.New("src and dst are required"))
		return
	}
	rep, err := ratelimit.Salvage(in.Src, in.Dst)
	if err != nil {
		code := http.StatusUnprocessableEntity
		if errors.Is(err, ratelimit.ErrLocked) {
			code = http.StatusConflict
		}
		writeError(w, code, err)
		return
	}
	s.log.Info("admin salvage", slog.String("src", in.Src), slog.String("dst", in.Dst),
		slog.Int("buckets", rep.Buckets), slog.Int("problems", len(rep.Problems)))
	problems := rep.Problems
	if problems == nil {
		problems = []string{}
	}
	writeJSON(w, http.StatusOK, struct {
		Buckets         int      `json:"buckets"`
		SnapshotRecords int      `json:"snapshot_records"`
		LogBatches      int      `json:"log_batches"`
		LogRecords      int      `json:"log_records"`
		Problems        []string `json:"problems"`
	}{rep.Buckets, rep.SnapshotRecords, rep.LogBatches, rep.LogRecords, problems})
}

// handleReload loads the configuration again, as SIGHUP does.
func (s *Server) handleReload(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		writeError(w, http.StatusMethodNotAllowed, fmt.Errorf("%s not allowed; use POST", r.Method))
		return
	}
	if err := s.reload.reload("admin"); err != nil {
		writeError(w, http.StatusUnprocessableEntity, err)
		return
	}
	writeJSON(w, http.StatusOK, struct {
		OK bool `json:"ok"`
	}{true})
}

// handleConfig lists the configuration serving: its files, domains and
// rules.
func (s *Server) handleConfig(w http.ResponseWriter, r *http.Request) {
	type rule struct {
		Name            string         `json:"name"`
		Rule            string         `json:"rule,omitempty"`
		Domain          string         `json:"domain"`
		File            string         `json:"file"`
		Line            int            `json:"line"`
		RequestsPerUnit uint32         `json:"requests_per_unit"`
		Unit            string         `json:"unit,omitempty"`
		UnitMultiplier  uint32         `json:"unit_multiplier,omitempty"`
		Unlimited       bool           `json:"unlimited,omitempty"`
		ShadowMode      bool           `json:"shadow_mode,omitempty"`
		QuotaMode       bool           `json:"quota_mode,omitempty"`
		Replaces        []string       `json:"replaces,omitempty"`
		Config          *nativeConfig  `json:"config,omitempty"`
		Metadata        map[string]any `json:"metadata,omitempty"`
	}
	cfg := s.eng.Config()
	out := struct {
		Files   []string `json:"files"`
		Domains []string `json:"domains"`
		Rules   []rule   `json:"rules"`
	}{Files: cfg.Files(), Domains: cfg.Domains(), Rules: []rule{}}
	for _, l := range cfg.Limits() {
		ru := rule{Name: l.Name, Rule: l.RuleName, Domain: l.Domain, File: l.File, Line: l.Line,
			RequestsPerUnit: l.RequestsPerUnit, UnitMultiplier: l.UnitMultiplier, Unlimited: l.Unlimited,
			ShadowMode: l.ShadowMode, QuotaMode: l.QuotaMode, Replaces: l.Replaces, Metadata: l.Metadata}
		if !l.Unlimited {
			ru.Unit = l.Unit.String()
		}
		if c := l.Config; c.Kind != 0 {
			ru.Config = &nativeConfig{Algorithm: algorithm(c.Kind), Rate: c.Rate, Period: seconds(c.Period),
				Capacity: c.Capacity, MaxReserved: c.MaxReserved, Shards: c.Shards}
		}
		out.Rules = append(out.Rules, ru)
	}
	writeJSON(w, http.StatusOK, out)
}
