// Build recipe for the stand-ins of the vendors' sidecar injectors (main.go): the standard
// library only, so that it builds in seconds and never drops a field of a Pod it edits.
module sexton.dev/testenv/vendor-webhook

go 1.24.0
