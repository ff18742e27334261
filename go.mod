module github.com/seed7fbd42b6/ratelimit

go 1.26.0

require (
	github.com/cespare/xxhash/v2 v2.3.0
	go.etcd.io/bbolt v1.5.0
)

require (
	github.com/stretchr/testify v1.12.1 // indirect
	go.yaml.in/yaml/v3 v3.0.6 // indirect
	golang.org/x/sync v0.23.0 // indirect
	golang.org/x/sys v0.48.0 // indirect
)
