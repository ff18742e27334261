module github.com/seed7fbd42b6/ratelimit/cmd/ratelimitd

go 1.26.0

require (
	github.com/seed7fbd42b6/ratelimit v0.0.0
	go.yaml.in/yaml/v3 v3.0.6
)

require (
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	go.etcd.io/bbolt v1.5.0 // indirect
	golang.org/x/sys v0.45.0 // indirect
)

replace github.com/seed7fbd42b6/ratelimit => ../..
