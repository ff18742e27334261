package config

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// File is one configuration file for Parse: the name errors give, and its
// contents.
type File struct {
	Name string
	Data []byte
}

// Load reads the configuration at path: one file, or a directory whose
// files are read in lexical order, subdirectories included, each holding
// one domain. Names starting with '.' (hidden files and directories) are
// skipped; symbolic links are followed, a directory reached twice read
// once; what is neither a regular file nor a directory is skipped. An empty
// directory is a configuration without domains. Errors are as Parse's,
// plus ErrRead.
func Load(path string, opts *Options) (*Config, error) {
	var errs errorList
	names := listFiles(path, &errs)
	files := make([]File, 0, len(names))
	for _, name := range names {
		data, err := os.ReadFile(name)
		if err != nil {
			errs.add(name, 0, "", ErrRead, "%v", unwrapPath(err))
			continue
		}
		files = append(files, File{Name: name, Data: data})
	}
	if err := errs.err(); err != nil {
		return nil, err
	}
	return Parse(files, opts)
}

// Files lists the files Load reads for path, in its order, with the
// errors (ErrRead) it would meet listing them: what a watcher of the
// configuration must look at, and nothing else (a pipe or a device beside
// the files is never opened).
func Files(path string) ([]string, error) {
	var errs errorList
	names := listFiles(path, &errs)
	return names, errs.err()
}

// listFiles returns the files Load reads for path.
func listFiles(path string, errs *errorList) []string {
	info, err := os.Stat(path)
	if err != nil {
		errs.add(path, 0, "", ErrRead, "%v", unwrapPath(err))
		return nil
	}
	if !info.IsDir() {
		if !info.Mode().IsRegular() {
			errs.add(path, 0, "", ErrRead, "not a regular file or a directory")
			return nil
		}
		return []string{path}
	}
	var out []string
	walkDir(path, make(map[string]bool), &out, errs)
	return out
}

func walkDir(dir string, visited map[string]bool, out *[]string, errs *errorList) {
	real, err := filepath.EvalSymlinks(dir)
	if err != nil {
		errs.add(dir, 0, "", ErrRead, "%v", unwrapPath(err))
		return
	}
	if visited[real] {
		return
	}
	visited[real] = true
	entries, err := os.ReadDir(dir)
	if err != nil {
		errs.add(dir, 0, "", ErrRead, "%v", unwrapPath(err))
		return
	}
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".") {
			continue
		}
		p := filepath.Join(dir, e.Name())
		info, err := os.Stat(p) // follows a symbolic link
		if err != nil {
			errs.add(p, 0, "", ErrRead, "%v", unwrapPath(err))
			continue
		}
		switch {
		case info.IsDir():
			walkDir(p, visited, out, errs)
		case info.Mode().IsRegular():
			*out = append(*out, p)
		}
	}
}

// unwrapPath drops the path an *os.PathError repeats, since the Error
// names the file already.
func unwrapPath(err error) error {
	if pe, ok := err.(*os.PathError); ok {
		return fmt.Errorf("%s: %w", pe.Op, pe.Err)
	}
	return err
}

// Parse builds a configuration from files, one domain each, in order. It
// reports every problem it finds (at most 20), each an *Error wrapping a
// sentinel, joined with errors.Is-able errors.Join when there are several.
func Parse(files []File, opts *Options) (*Config, error) {
	b := &builder{cfg: &Config{domains: make(map[string]*domain)}}
	if opts != nil {
		b.opts = *opts
	}
	for _, f := range files {
		b.cfg.files = append(b.cfg.files, f.Name)
		p := &parser{file: f.Name, errs: &b.errs}
		if raw := p.parseFile(f.Data); raw != nil {
			b.addFile(f.Name, raw)
		}
	}
	if err := b.errs.err(); err != nil {
		return nil, err
	}
	return b.cfg, nil
}

// builder assembles parsed files into a Config.
type builder struct {
	opts Options
	cfg  *Config
	errs errorList
}

func (b *builder) addFile(file string, f *rawFile) {
	d := b.cfg.domains[f.domain]
	if d != nil && !b.opts.MergeDomains {
		b.errs.add(file, f.domainNode.Line, "domain", ErrDuplicate,
			"domain %q is also configured in %s:%d (one file per domain)", f.domain, d.file, d.line)
		return
	}
	if d == nil {
		d = &domain{name: f.domain, root: make(level), file: file, line: f.domainNode.Line}
		b.cfg.domains[f.domain] = d
	}
	b.insert(file, d, d.root, nil, nil, f.descriptors)
}

// insert adds descriptors to the level lv, whose path from the top of
// domain d is path (with levels describing it).
func (b *builder) insert(file string, d *domain, lv level, path []Entry, levels []levelInfo, ds []*rawDescriptor) {
	for _, rd := range ds {
		kr := lv[rd.key]
		if kr == nil {
			kr = &keyRules{exact: make(map[string]*node)}
			lv[rd.key] = kr
		}
		n := &node{key: rd.key, value: rd.value, file: file, line: rd.line}
		var prev *node
		if rd.value == "" {
			prev = kr.keyOnly
		} else {
			prev = kr.exact[rd.value]
		}
		if prev != nil {
			what := fmt.Sprintf("key %q value %q", rd.key, rd.value)
			if rd.value == "" {
				what = fmt.Sprintf("key %q without a value", rd.key)
			}
			b.errs.add(file, rd.line, "key", ErrDuplicate, "a second descriptor with %s among its siblings (first at %s:%d)",
				what, prev.file, prev.line)
			continue
		}
		if rd.value == "" {
			kr.keyOnly = n
		} else {
			kr.exact[rd.value] = n
			if strings.Contains(rd.value, "*") {
				n.parts = strings.Split(rd.value, "*")
				kr.wildcard = append(kr.wildcard, n)
			}
		}
		p := append(path[:len(path):len(path)], Entry{Key: rd.key, Value: rd.value})
		lvs := append(levels[:len(levels):len(levels)], levelInfo{key: rd.key, value: rd.value,
			wildcard: n.parts != nil, share: rd.share, valueToMetric: rd.valueToMet})
		if rd.rateLimit != nil {
			n.limit = b.limit(file, d.name, p, lvs, rd)
		}
		if len(rd.children) > 0 {
			n.children = make(level)
			b.insert(file, d, n.children, p, lvs, rd.children)
		}
	}
}

// limit makes the Limit of a descriptor with a rate_limit.
func (b *builder) limit(file, domain string, path []Entry, levels []levelInfo, rd *rawDescriptor) *Limit {
	rl := rd.rateLimit
	l := &Limit{
		RuleName:        rl.name,
		Domain:          domain,
		Path:            path,
		File:            file,
		Line:            rd.line,
		Config:          rl.cfg,
		RequestsPerUnit: rl.requestsPerUnit,
		Unit:            rl.unit,
		UnitMultiplier:  rl.multiplier,
		Unlimited:       rl.unlimited,
		Blocked:         rl.blocked,
		ShadowMode:      rd.shadow,
		QuotaMode:       rd.quota,
		DetailedMetric:  rd.detailed,
		Replaces:        rl.replaces,
		Metadata:        rd.metadata,
		StatsKey:        staticStatsKey(domain, path),
		levels:          levels,
		dynamicStats:    rd.detailed,
	}
	for _, lv := range levels {
		l.dynamicStats = l.dynamicStats || lv.valueToMetric
	}
	l.Name = pathName(domain, path) // not the rule's name: adding one keeps the buckets
	b.cfg.limits = append(b.cfg.limits, l)
	return l
}
