module github.com/hirlab/hir

go 1.26

require (
	github.com/alecthomas/participle/v2 v2.1.4 // indirect
	github.com/ebitengine/purego v0.11.3 // indirect
	github.com/google/go-cmp v0.7.0 // indirect
	github.com/stretchr/testify v1.12.1 // indirect
)
