package redislimit

import (
	"context"
	"fmt"
	"strings"

	"github.com/redis/go-redis/v9"
)

// fcallCmd is an FCALL that go-redis never retries on its own: a call
// whose reply was lost may have run, and running it again could grant or
// credit twice. A missing library (the call did not run) is loaded and the
// call retried here, once (see exchange).
type fcallCmd struct{ *redis.Cmd }

// NoRetry tells go-redis not to retry the command.
func (fcallCmd) NoRetry() bool { return true }

// exchange sends r's programs (pipelined when more than one) and finishes
// their parts with the replies. A server that does not know the function
// (its functions were flushed, or it is a new primary that never had them)
// gets the library loaded, and the call is sent once more.
func (s *redisStore) exchange(r *round) {
	ctx := context.Background()
	nowArg, err := s.clockArg()
	if err != nil {
		for _, p := range r.progs {
			s.failProgram(p, err)
		}
		return
	}
	cmds := make([]fcallCmd, len(r.progs))
	for i, p := range r.progs {
		cmds[i] = s.programCmd(ctx, p, nowArg)
	}
	s.send(ctx, cmds)
	var retry []int
	for i := range cmds {
		if err := cmds[i].Err(); err != nil && strings.Contains(err.Error(), "Function not found") {
			retry = append(retry, i)
		}
	}
	if len(retry) > 0 && loadLibrary(ctx, s.client) == nil {
		again := make([]fcallCmd, len(retry))
		for k, i := range retry {
			again[k] = s.fcallCmd(ctx, r.progs[i].keys, r.progs[i].out, nowArg)
		}
		s.send(ctx, again)
		for k, i := range retry {
			cmds[i] = again[k]
		}
	}
	var foreign []*program
	for i, p := range r.progs {
		if err := cmds[i].Err(); err != nil && strings.Contains(err.Error(), notABucket) && len(p.parts) > 1 {
			foreign = append(foreign, p)
			continue
		}
		s.finishCmd(p, cmds[i])
	}
	if len(foreign) > 0 {
		s.isolate(ctx, foreign, nowArg)
	}
}

// clockArg is the clock argument of a function call: "" for the
// servers' TIME, else Options.Now's reading as (us, rem); errClockRange
// for a reading the function cannot represent.
func (s *redisStore) clockArg() (string, error) {
	if s.clock == nil {
		return "", nil
	}
	now := s.clock()
	if !clockInRange(now) {
		return "", errClockRange
	}
	us, rem := split(now)
	return string(f64s(make([]byte, 0, 16), us, rem)), nil
}

// programCmd builds p's function call.
func (s *redisStore) programCmd(ctx context.Context, p *program, nowArg string) fcallCmd {
	blob := p.build(s.ks, s.clock != nil, s.sweep, float64(s.holdTTL.Milliseconds())) // fills p.keys
	return s.fcallCmd(ctx, p.keys, blob, nowArg)
}

// finishCmd finishes p's parts with the reply to its call, or its error.
func (s *redisStore) finishCmd(p *program, cmd fcallCmd) {
	b, err := cmd.Text()
	if err != nil {
		s.failProgram(p, fmt.Errorf("redislimit: function call on tag %s: %w", tags[p.tags[0]], err))
		return
	}
	s.finishProgram(p, []byte(b))
}

// notABucket is in the error of a function call that met a key under
// the prefix that is not a bucket; the call stopped before writing any.
const notABucket = "is not a bucket"

// isolate sends each part of progs, whose calls met a key that is not a
// bucket, in a call of its own (pipelined, in order), so that only the
// parts naming that key fail, not every request batched with them.
func (s *redisStore) isolate(ctx context.Context, progs []*program, nowArg string) {
	var alone []*program
	for _, p := range progs {
		start := 0
		for i, tag := range p.tags {
			for _, pt := range p.parts[start:p.ends[i]] {
				q := getProgram()
				q.addSection(tag, []*part{pt}, pt.size())
				alone = append(alone, q)
			}
			start = p.ends[i]
		}
	}
	cmds := make([]fcallCmd, len(alone))
	for i, q := range alone {
		cmds[i] = s.programCmd(ctx, q, nowArg)
	}
	s.send(ctx, cmds)
	for i, q := range alone {
		s.finishCmd(q, cmds[i])
		putProgram(q)
	}
}

func (s *redisStore) fcallCmd(ctx context.Context, keys []string, blob []byte, nowArg string) fcallCmd {
	args := make([]any, 0, 3+len(keys)+2)
	args = append(args, "fcall", libraryName, len(keys))
	for _, k := range keys {
		args = append(args, k)
	}
	args = append(args, blob, nowArg)
	cmd := redis.NewCmd(ctx, args...)
	cmd.SetFirstKeyPos(3)
	return fcallCmd{cmd}
}

// send runs cmds, one alone or several in a pipeline; errors stay in the
// commands.
func (s *redisStore) send(ctx context.Context, cmds []fcallCmd) {
	if len(cmds) == 1 {
		_ = s.client.Process(ctx, cmds[0])
		return
	}
	pipe := s.client.Pipeline()
	for _, c := range cmds {
		_ = pipe.Process(ctx, c)
	}
	_, _ = pipe.Exec(ctx)
}

// failProgram finishes every part of p with err.
func (s *redisStore) failProgram(p *program, err error) {
	for _, pt := range p.parts {
		pt.err = err
		s.finishPart(pt)
	}
}

// finishProgram reads a program's reply into its parts and finishes them.
func (s *redisStore) finishProgram(p *program, b []byte) {
	rd := reply{b: b}
	now := rd.time()
	for _, pt := range p.parts {
		pt.now = now
		s.readPart(pt, &rd)
		if rd.err != nil {
			break
		}
	}
	if rd.err == nil && rd.off != len(b) {
		rd.fail()
	}
	if rd.err != nil {
		s.failProgram(p, rd.err)
		return
	}
	for _, pt := range p.parts {
		s.finishPart(pt)
	}
}
