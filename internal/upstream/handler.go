package upstream

import (
	"context"

	"github.com/mcp-gateway/mcp-gateway/internal/jsonrpc"
)

// CallHandler receives what a server sends about one call while it runs,
// when the transport can tell (a Streamable HTTP call's own SSE response
// stream, in both eras): notifications such as progress or log messages,
// and requests such as sampling/createMessage, elicitation/create or
// roots/list, which a legacy server may send there.
//
// Notify is called on the goroutine of the call, in the order the server
// sent the messages, and always before Send (or Call) returns; it must not block
// long. The message aliases a read buffer: copy what is kept.
//
// Request runs on its own goroutine. Its ctx carries the values of the
// call's context and is done when the call ends (a server cannot use an
// answer after that) or the Client closes. It returns the response to send
// back (Result or Error set; the Client sets the id), which must not be
// nil; the Client POSTs it to the server as it does any answer.
type CallHandler interface {
	Notify(n *jsonrpc.Message)
	Request(ctx context.Context, req *jsonrpc.Message) *jsonrpc.Message
}

type callHandlerKey struct{}

// WithCallHandler returns a context that makes Client.Send and Call deliver to h
// the messages that arrive on that call's own response stream, instead of
// to Options.OnNotification and Options.OnRequest. Over stdio and the
// deprecated HTTP+SSE transport, where all messages share one stream, and
// for what a legacy server sends on its GET stream, the Options callbacks
// still get everything. A nil h leaves ctx unchanged.
func WithCallHandler(ctx context.Context, h CallHandler) context.Context {
	if h == nil {
		return ctx
	}
	return context.WithValue(ctx, callHandlerKey{}, h)
}

func callHandlerFrom(ctx context.Context) CallHandler {
	h, _ := ctx.Value(callHandlerKey{}).(CallHandler)
	return h
}
