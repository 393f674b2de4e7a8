module vyre.dev/cuda/bindings/go

go 1.19
