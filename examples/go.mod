module github.com/seed7fbd42b6/ratelimit/examples

go 1.25.0

require github.com/seed7fbd42b6/ratelimit v0.0.0

require (
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	go.etcd.io/bbolt v1.5.0 // indirect
	golang.org/x/sys v0.45.0 // indirect
)

replace github.com/seed7fbd42b6/ratelimit => ../
