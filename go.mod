module github.com/seed7fbd42b6/ratelimit

go 1.25.0

require (
	github.com/cespare/xxhash/v2 v2.3.0
	go.etcd.io/bbolt v1.5.0
)

require golang.org/x/sys v0.45.0 // indirect
