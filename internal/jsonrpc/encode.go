package jsonrpc

import (
	"encoding/json"
	"io"
	"strconv"
)

// The Append functions write one message each, splicing raw values in
// as they are. Raw values must be valid JSON (anything from Decode is).

// AppendRequest appends a request. params may be nil.
func AppendRequest(dst []byte, id json.RawMessage, method string, params json.RawMessage) []byte {
	dst = append(dst, `{"jsonrpc":"2.0","id":`...)
	dst = append(dst, id...)
	dst = append(dst, `,"method":`...)
	dst = AppendString(dst, method)
	if params != nil {
		dst = append(dst, `,"params":`...)
		dst = append(dst, params...)
	}
	return append(dst, '}')
}

// AppendNotification appends a notification. params may be nil.
func AppendNotification(dst []byte, method string, params json.RawMessage) []byte {
	dst = append(dst, `{"jsonrpc":"2.0","method":`...)
	dst = AppendString(dst, method)
	if params != nil {
		dst = append(dst, `,"params":`...)
		dst = append(dst, params...)
	}
	return append(dst, '}')
}

// AppendResult appends a successful response.
func AppendResult(dst []byte, id, result json.RawMessage) []byte {
	dst = append(dst, resultPrefix(id)...)
	dst = append(dst, result...)
	return append(dst, '}')
}

// AppendError appends an error response. A nil id is written as null, as
// JSON-RPC requires when the request's id could not be read.
func AppendError(dst []byte, id json.RawMessage, e *Error) []byte {
	if id == nil {
		id = json.RawMessage("null")
	}
	dst = append(dst, `{"jsonrpc":"2.0","id":`...)
	dst = append(dst, id...)
	dst = append(dst, `,"error":{"code":`...)
	dst = strconv.AppendInt(dst, e.Code, 10)
	dst = append(dst, `,"message":`...)
	dst = AppendString(dst, e.Message)
	if len(e.Data) > 0 {
		dst = append(dst, `,"data":`...)
		dst = append(dst, e.Data...)
	}
	return append(dst, "}}"...)
}

// Append appends m in wire form.
func (m *Message) Append(dst []byte) []byte {
	switch {
	case m.Error != nil:
		return AppendError(dst, m.ID, m.Error)
	case m.Method == "":
		return AppendResult(dst, m.ID, m.Result)
	case m.ID == nil:
		return AppendNotification(dst, m.Method, m.Params)
	default:
		return AppendRequest(dst, m.ID, m.Method, m.Params)
	}
}

// WriteResult writes a successful response to w without copying result:
// the envelope and the result go out as separate writes, so a large
// result is never held twice.
func WriteResult(w io.Writer, id, result json.RawMessage) error {
	if len(result) < 4096 {
		_, err := w.Write(AppendResult(make([]byte, 0, len(result)+64), id, result))
		return err
	}
	if _, err := io.WriteString(w, resultPrefix(id)); err != nil {
		return err
	}
	if _, err := w.Write(result); err != nil {
		return err
	}
	_, err := w.Write([]byte{'}'})
	return err
}

func resultPrefix(id json.RawMessage) string {
	return `{"jsonrpc":"2.0","id":` + string(id) + `,"result":`
}

// AppendString appends s as a JSON string.
func AppendString(dst []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c == '"' || c == '\\' || c >= 0x80 {
			b, _ := json.Marshal(s) // strings always marshal
			return append(dst, b...)
		}
	}
	dst = append(dst, '"')
	dst = append(dst, s...)
	return append(dst, '"')
}

// String returns s as a raw JSON string.
func String(s string) json.RawMessage { return AppendString(nil, s) }
