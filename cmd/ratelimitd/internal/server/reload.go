package server

import (
	"log/slog"
	"sync"
	"time"

	"github.com/seed7fbd42b6/ratelimit/cmd/ratelimitd/internal/config"
	"github.com/seed7fbd42b6/ratelimit/cmd/ratelimitd/internal/engine"
)

// reloader loads the configuration (and the TLS files) again on demand
// (SIGHUP, the admin API) and when its files change. A configuration
// that fails to load, or that the limiter refuses, or TLS files that fail
// to load, are logged and counted as a failed reload, and the
// configuration and certificates serving go on.
type reloader struct {
	path string
	opts config.Options
	eng  *engine.Engine
	log  *slog.Logger
	tls  *certificates // re-read with the configuration; nil without TLS

	mu   sync.Mutex  // one reload at a time
	last fingerprint // of the files as last loaded (or refused); guarded by mu

	// The outcomes so far, under a lock of their own, so that reading
	// them (/metrics) never waits for a reload under way.
	statsMu  sync.Mutex
	good     uint64
	bad      uint64
	lastOK   bool
	lastTime time.Time

	// started, set by tests, is called as a reload begins, with mu held.
	started func()
}

type reloadStats struct {
	good, bad uint64
	lastOK    bool
	lastTime  time.Time
}

func (r *reloader) stats() reloadStats {
	r.statsMu.Lock()
	defer r.statsMu.Unlock()
	return reloadStats{good: r.good, bad: r.bad, lastOK: r.lastOK, lastTime: r.lastTime}
}

// record counts the outcome of the reload that began at.
func (r *reloader) record(ok bool, at time.Time) {
	r.statsMu.Lock()
	defer r.statsMu.Unlock()
	if ok {
		r.good++
	} else {
		r.bad++
	}
	r.lastOK, r.lastTime = ok, at
}

// initial records the configuration loaded at start.
func (r *reloader) initial(fp fingerprint) {
	r.mu.Lock()
	r.last = fp
	r.mu.Unlock()
	r.statsMu.Lock()
	r.lastOK, r.lastTime = true, time.Now()
	r.statsMu.Unlock()
}

// reload loads the configuration and, if it is valid, makes it serve.
func (r *reloader) reload(reason string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.reloadLocked(reason, r.fingerprint())
}

// fingerprint is that of the configuration and the TLS files: a reload
// that failed is tried again when either changes.
func (r *reloader) fingerprint() fingerprint {
	var files TLSFiles
	if r.tls != nil {
		files = r.tls.files
	}
	return fingerprintOf(r.path, files)
}

func (r *reloader) reloadLocked(reason string, fp fingerprint) error {
	if r.started != nil {
		r.started()
	}
	r.last = fp
	at := time.Now()
	var certs *loadedCerts // the TLS files, read again with the configuration (either changing reloads both)
	cfg, err := config.Load(r.path, &r.opts)
	if err == nil && r.tls != nil {
		certs, err = r.tls.files.load()
	}
	if err == nil {
		err = r.eng.SetConfig(cfg)
	}
	if err != nil {
		r.record(false, at)
		r.log.Error("configuration refused; the previous one keeps serving", slog.String("reason", reason),
			slog.String("config", r.path), slog.Any("err", err))
		return err
	}
	if certs != nil {
		r.tls.cur.Store(certs)
	}
	r.record(true, at)
	r.log.Info("configuration reloaded", slog.String("reason", reason), slog.String("config", r.path),
		slog.Int("domains", len(cfg.Domains())), slog.Int("rules", len(cfg.Limits())))
	return nil
}

// poll reloads if the files (TLS files included) changed since they were
// last loaded.
func (r *reloader) poll() {
	fp := r.fingerprint()
	r.mu.Lock()
	defer r.mu.Unlock()
	if fp != r.last {
		r.reloadLocked("file change", fp)
	}
}
