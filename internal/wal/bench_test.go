package wal

import (
	"fmt"
	"sync"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/seed7fbd42b6/ratelimit/internal/cputime"
)

func BenchmarkAppendRecord(b *testing.B) {
	b.ReportAllocs()
	r := Record{Name: "api", Key: "user-12345678", Shard: 3, Value: 1.5, TS: time.Now().UnixNano()}
	buf := make([]byte, 0, 4096)
	b.SetBytes(int64(RecordSize(r)))
	for b.Loop() {
		if len(buf) > 4000 {
			buf = buf[:0]
		}
		buf = AppendRecord(buf, r)
	}
}

func BenchmarkDecodeBatch(b *testing.B) {
	b.ReportAllocs()
	recs := make([]Record, 512)
	for i := range recs {
		recs[i] = Record{Name: "api", Key: fmt.Sprintf("user-%08d", i), Value: float64(i), TS: int64(i)}
	}
	batch := EncodeBatch(nil, recs)
	b.SetBytes(int64(len(batch)))
	for b.Loop() {
		if err := DecodeBatch(batch, func(Record) error { return nil }); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N*len(recs))/b.Elapsed().Seconds(), "records/s")
}

// BenchmarkAppendCommit measures durable throughput: each producer appends
// one record and waits for its commit before the next, as a caller of the
// limiter does.
func BenchmarkAppendCommit(b *testing.B) {
	for _, producers := range []int{1, 16, 256, 1024} {
		b.Run(fmt.Sprintf("producers=%d", producers), func(b *testing.B) {
			b.ReportAllocs()
			l := openBenchLog(b)
			var wg sync.WaitGroup
			share := b.N / producers
			b.ResetTimer()
			start := time.Now()
			for p := range producers {
				n := share
				if p < b.N%producers {
					n++
				}
				wg.Add(1)
				go func() {
					defer wg.Done()
					w := make(chanWaiter, 1)
					recs := []Record{{Name: "api", Key: fmt.Sprintf("user-%06d", p), Value: 1}}
					for i := range n {
						recs[0].TS = int64(i)
						l.Append(recs, w)
						if err := <-w; err != nil {
							b.Error(err)
							return
						}
					}
				}()
			}
			wg.Wait()
			elapsed := time.Since(start)
			b.StopTimer()
			st := l.Stats()
			b.ReportMetric(float64(st.Commits)/elapsed.Seconds(), "commits/s")
			b.ReportMetric(float64(st.Records)/elapsed.Seconds(), "records/s")
			if st.Commits > 0 {
				b.ReportMetric(float64(st.Records)/float64(st.Commits), "records/commit")
				b.ReportMetric(float64(st.CommitNanos.Quantile(0.5))/1e3, "p50-commit-us<=")
			}
		})
	}
}

// BenchmarkCommitBatch is one 1,000-record batch (~35 KB, so stored in
// chunks) appended and committed per operation, by one producer: with
// fsync=false (bbolt's NoSync) it is the CPU a commit costs the writer
// while every caller of its cohort waits, with fsync=true the whole commit.
// cpu-ns/op is the process's CPU time (user + system) per commit, so the
// difference between the two is what the fsyncs cost the processors, not
// only the time they take. prealloc=off commits into a file bbolt grows
// itself (sparsely), prealloc=on into the zeros Open wrote (preallocate):
// the difference is what journalling the file's new blocks costs a commit.
func BenchmarkCommitBatch(b *testing.B) {
	for _, c := range []struct {
		name     string
		fsync    bool
		prealloc int64
	}{
		{"fsync=false", false, 0},
		{"fsync=true/prealloc=on", true, 0},
		{"fsync=true/prealloc=off", true, -1},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			l, err := Open(b.TempDir()+"/wal.db", Options{NoFreelistSync: true, Preallocate: c.prealloc})
			if err != nil {
				b.Fatal(err)
			}
			defer l.Close()
			l.DB().NoSync = !c.fsync
			recs := make([]Record, 1000)
			for i := range recs {
				recs[i] = Record{Name: "user", Key: fmt.Sprintf("key-%07d", i*7919%1_000_000), Value: 3, TS: 1e18}
			}
			w := make(chanWaiter, 1)
			ops, cpu0 := 0, cputime.Process()
			for b.Loop() {
				l.Append(recs, w)
				if err := <-w; err != nil {
					b.Fatal(err)
				}
				ops++
			}
			if cpu := cputime.Process() - cpu0; cpu > 0 {
				b.ReportMetric(float64(cpu)/float64(ops), "cpu-ns/op")
			}
			if st := l.Stats(); st.Commits > 0 {
				b.ReportMetric(float64(st.Bytes)/float64(st.Commits), "bytes/commit")
			}
		})
	}
}

// BenchmarkTruncate is TruncateTx of a whole log of n one-record batches,
// as a snapshot does: its ns/batch should not grow with n.
func BenchmarkTruncate(b *testing.B) {
	for _, n := range []int{1000, 16000} {
		b.Run(fmt.Sprintf("batches=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			l := openBenchLog(b)
			l.db.NoSync = true // building the log is not what is measured
			w := make(chanWaiter, 1)
			var took time.Duration
			for b.Loop() {
				b.StopTimer()
				for i := range n {
					l.Append([]Record{{Name: "b", Key: fmt.Sprint(i)}}, w)
					if err := <-w; err != nil {
						b.Fatal(err)
					}
				}
				b.StartTimer()
				start := time.Now()
				if err := l.db.Update(func(tx *bolt.Tx) error { return l.TruncateTx(tx, l.Position()) }); err != nil {
					b.Fatal(err)
				}
				took += time.Since(start)
			}
			b.ReportMetric(float64(took.Nanoseconds())/float64(b.N*n), "ns/batch")
		})
	}
}

// openBenchLog opens a log in b's temp dir, closed when b ends.
func openBenchLog(b *testing.B) *Log {
	b.Helper()
	l, err := Open(b.TempDir()+"/wal.db", Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { l.Close() })
	return l
}
