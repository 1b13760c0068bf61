package jsonrpc

// SetHooks sets scanHook and encodeHook for a test, and returns what
// restores them. Tests that set them must not run in parallel.
func SetHooks(scan func(data []byte), encode func(*Outgoing)) (reset func()) {
	scanHook, encodeHook = scan, encode
	return func() { scanHook, encodeHook = nil, nil }
}
