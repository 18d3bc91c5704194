module faultload/client

go 1.24

require (
	golang.org/x/crypto v0.36.0
	golang.org/x/sys v0.31.0
	google.golang.org/protobuf v1.36.1
)
