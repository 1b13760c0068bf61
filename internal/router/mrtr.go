package router

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/mcp-gateway/mcp-gateway/internal/jsonrpc"
	"github.com/mcp-gateway/mcp-gateway/internal/upstream"
)

// Translation of server-to-client requests between the eras (2026-07-28
// basic/patterns/mrtr):
//
//   - A legacy host calling a modern upstream: the upstream answers with
//     an input_required result; the gateway asks the host each input
//     request on the host's stream, then retries the call with the
//     answers as inputResponses (and the upstream's requestState).
//   - A modern host calling a legacy upstream: the upstream sends a
//     request while the call runs; the gateway keeps the call running,
//     answers the host with an input_required result, and hands the
//     answers of the host's retry to the waiting upstream request. The
//     running call lives in this process: its requestState names it and
//     this replica, is sealed (seal.go) and expires with parkTTL. A retry
//     that reaches another replica is answered by this one (peers.go,
//     with state.store redis); without shared state, another process
//     rejects the state as unknown, and the host starts over.
//   - A modern host calling a modern upstream: the input_required result
//     is relayed, its requestState sealed around the upstream's own, so
//     that only the same identity can continue the call (seal.go).

// gatherWindow is how long the gateway waits, after a legacy upstream's
// first request for input, for the others it sends at the same time, so
// that they reach the host in one input_required result.
const gatherWindow = 25 * time.Millisecond

// maxInputRounds bounds the input_required rounds the gateway answers on
// behalf of a legacy host.
const maxInputRounds = 10

// interactiveMethods may answer with input_required.
var interactiveMethods = []string{"tools/call", "prompts/get", "resources/read"}

// fulfil answers a modern upstream's input_required result for a legacy
// host: it asks the host each input request, retries the call with the
// answers, and repeats until the upstream completes.
func (r *Router) fulfil(ctx context.Context, u *upstreamState, client Upstream, cl *call, out *jsonrpc.Outgoing, resp *jsonrpc.Message) (*jsonrpc.Message, error) {
	for round := 0; ; round++ {
		if resp.Error != nil || resp.ResultType != "input_required" {
			return resp, nil
		}
		if round == maxInputRounds {
			return &jsonrpc.Message{Error: jsonrpc.NewError(jsonrpc.CodeInternalError, "The server %q asked for input more than %d times", u.Name, maxInputRounds)}, nil
		}
		requests, _ := jsonrpc.Field(resp.Result, "inputRequests")
		var asks map[string]struct {
			Method string          `json:"method"`
			Params json.RawMessage `json:"params"`
		}
		if len(requests) > 0 {
			if err := json.Unmarshal(requests, &asks); err != nil {
				return &jsonrpc.Message{Error: jsonrpc.NewError(jsonrpc.CodeInternalError, "The server %q sent malformed inputRequests: %v", u.Name, err)}, nil
			}
		}
		answers := map[string]json.RawMessage{}
		for _, key := range slices.Sorted(mapKeys(asks)) {
			ask := asks[key]
			answer := cl.Request(ctx, &jsonrpc.Message{Method: ask.Method, Params: ask.Params})
			if answer.Error != nil {
				return &jsonrpc.Message{Error: answer.Error}, nil
			}
			answers[key] = answer.Result
		}
		inputs, _ := json.Marshal(answers)
		retry := out.Clone()
		retry.Set("inputResponses", inputs)
		state, _ := jsonrpc.Field(resp.Result, "requestState")
		retry.Set("requestState", append(json.RawMessage(nil), state...)) // nil removes it
		var err error
		if resp, err = client.Send(upstream.WithCallHandler(ctx, cl), retry); err != nil {
			return nil, err
		}
	}
}

func mapKeys[V any](m map[string]V) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// parkTTL bounds how long a legacy upstream call waits for a modern
// host's retry with the input it asked for.
const parkTTL = 10 * time.Minute

// parkedCall is a legacy upstream call that runs while a modern host
// gathers the input the upstream asked for.
type parkedCall struct {
	id      string
	owner   string // the Caller.owner() of the host whose call it is
	method  string
	subject string // the tool, prompt or URI: a retry must name the same
	cl      *call
	// outcome receives the upstream's final answer.
	outcome chan callOutcome
	// asks receives the upstream's requests for input.
	asks chan *inputAsk
	// missing receives the capability a request needed that the host did
	// not declare.
	missing chan string
	cancel  context.CancelFunc
	// expires is when an unclaimed parked call is given up.
	expires time.Time
	// round counts the input_required answers, so that each round has
	// its own requestState.
	round int

	mu sync.Mutex // guards the fields below
	// outstanding are the asks sent to the host and not yet answered, by
	// input key.
	outstanding map[string]*inputAsk
	nextKey     int
}

type callOutcome struct {
	resp *jsonrpc.Message
	err  error
}

// inputAsk is one upstream request waiting for the host's answer.
type inputAsk struct {
	method string
	params json.RawMessage
	answer chan *jsonrpc.Message
}

// parking holds the parked calls.
type parking struct {
	mu    sync.Mutex // guards calls
	calls map[string]*parkedCall
}

// park keeps a call until the host's retry takes it, or it expires, and
// returns the round it now waits in: each round has a requestState of
// its own, so that a state is good for one retry.
func (p *parking) park(pc *parkedCall) int {
	now := time.Now()
	p.mu.Lock()
	defer p.mu.Unlock()
	pc.expires = now.Add(parkTTL)
	pc.round++
	if p.calls == nil {
		p.calls = map[string]*parkedCall{}
	}
	p.sweepLocked(now)
	p.calls[pc.id] = pc
	return pc.round
}

// sweepLocked gives up the parked calls no host came back for: their
// upstream calls are cancelled. p.mu must be held.
func (p *parking) sweepLocked(now time.Time) {
	for id, pc := range p.calls {
		if now.After(pc.expires) {
			delete(p.calls, id)
			pc.cancel()
		}
	}
}

// closeAll cancels every parked call.
func (p *parking) closeAll() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for id, pc := range p.calls {
		delete(p.calls, id)
		pc.cancel()
	}
}

// take removes and returns the parked call an opened requestState names,
// if it is waiting in the state's round for the state's owner and
// request.
func (p *parking) take(st *sealedState) *parkedCall {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.sweepLocked(time.Now())
	pc := p.calls[st.Parked]
	if pc == nil || pc.round != st.Round || pc.owner != st.Owner || pc.method != st.Method || pc.subject != st.Subject {
		return nil
	}
	delete(p.calls, pc.id)
	return pc
}

// forwardParked runs a call of a modern host to a legacy upstream. end
// (nil without limits) frees the call's concurrent_calls slot: the
// upstream call holds it across rounds, for up to parkTTL, and frees it
// as it ends, before its answer goes out, so that the host's next call
// finds the slot free.
func (r *Router) forwardParked(ctx context.Context, c *Caller, u *upstreamState, client Upstream, calls *callSet, release, end func(), in *jsonrpc.Request, out *jsonrpc.Outgoing, subject string) *Reply {
	if end == nil {
		end = func() {}
	}
	method := out.Method
	cl := r.startCall(c, u, calls, in, out)
	callCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), parkTTL)
	r.mu.Lock()
	r.nextParked++
	id := strconv.FormatUint(r.nextParked, 36) + "-" + randomTag()
	r.mu.Unlock()
	pc := &parkedCall{
		id: id, owner: c.owner(), method: method, subject: subject, cl: cl, cancel: cancel,
		outcome: make(chan callOutcome, 1), asks: make(chan *inputAsk), missing: make(chan string, 1),
		outstanding: map[string]*inputAsk{},
	}
	cl.parked = pc
	r.parkedRunning.Add(1)
	if !r.spawn(func() {
		defer r.parkedRunning.Add(-1)
		defer release()
		defer cl.end()
		defer cancel()
		resp, err := client.Send(upstream.WithCallHandler(callCtx, cl), out)
		end()
		pc.outcome <- callOutcome{resp, err}
	}) {
		r.parkedRunning.Add(-1)
		cl.end()
		cancel()
		release()
		end()
		return errorReply(jsonrpc.CodeInternalError, "The gateway is shutting down")
	}
	return r.awaitParked(ctx, c, u, pc)
}

// awaitParkedPoll is how often AwaitParked looks whether the parked
// calls have ended.
const awaitParkedPoll = 20 * time.Millisecond

// AwaitParked waits until every call parked here has ended (its host's
// last retry answered, or the call given up), or ctx is done, and
// reports whether they all ended: a replica that is stopping keeps
// serving them (the hosts' retries reach it through the other replicas)
// once its HTTP server has stopped, before Close cancels what is left.
func (r *Router) AwaitParked(ctx context.Context) bool {
	t := time.NewTicker(awaitParkedPoll)
	defer t.Stop()
	for r.parkedRunning.Load() > 0 {
		select {
		case <-ctx.Done():
			return false
		case <-t.C:
		}
	}
	return true
}

// resumeParked continues a parked call with a modern host's retry: the
// answers go to the upstream requests waiting for them.
func (r *Router) resumeParked(ctx context.Context, c *Caller, u *upstreamState, st *sealedState, in *jsonrpc.Request) *Reply {
	pc := r.parked.take(st)
	if pc == nil {
		return errorReply(jsonrpc.CodeInvalidParams, "Invalid params: %v", errBadState)
	}
	pc.answer(in.InputResponses)
	return r.awaitParked(ctx, c, u, pc)
}

// awaitParked waits for a parked call's next event: its final answer, or
// requests for input, which go to the host as an input_required result
// while the call stays parked.
func (r *Router) awaitParked(ctx context.Context, c *Caller, u *upstreamState, pc *parkedCall) *Reply {
	pc.cl.setCaller(c) // progress and logs of this round go to this request
	if keys := pc.unanswered(); len(keys) > 0 {
		return r.inputRequired(pc, keys)
	}
	select {
	case out := <-pc.outcome:
		if out.err != nil {
			return r.unavailable(ctx, u, pc.method, pc.subject, out.err)
		}
		return replyOf(out.resp)
	case capability := <-pc.missing:
		pc.cancel()
		data, _ := json.Marshal(map[string]any{"requiredCapabilities": map[string]any{capability: map[string]any{}}})
		return &Reply{Error: &jsonrpc.Error{Code: jsonrpc.CodeMissingRequiredClientCapability,
			Message: "Missing required client capability: " + capability, Data: data}}
	case ask := <-pc.asks:
		keys := []string{pc.add(ask)}
		// Requests the upstream sends together go out together: a legacy
		// server sends each from its own goroutine, so they arrive a few
		// microseconds apart. gatherWindow waits for the stragglers.
		window := time.NewTimer(gatherWindow)
		defer window.Stop()
		for more := true; more; {
			select {
			case a := <-pc.asks:
				keys = append(keys, pc.add(a))
			case <-window.C:
				more = false
			}
		}
		return r.inputRequired(pc, keys)
	case <-ctx.Done():
		pc.cancel() // the host is gone: nothing is left running for it
		return errorReply(jsonrpc.CodeInternalError, "The request was cancelled")
	}
}

// inputRequired parks the call and answers the host with its requests.
func (r *Router) inputRequired(pc *parkedCall, keys []string) *Reply {
	requests := map[string]json.RawMessage{}
	pc.mu.Lock()
	for _, k := range keys {
		a := pc.outstanding[k]
		requests[k], _ = json.Marshal(map[string]any{"method": a.method, "params": a.params})
	}
	pc.mu.Unlock()
	state := r.sealer.seal(sealedState{Owner: pc.owner, Method: pc.method, Subject: pc.subject, Parked: pc.id, Round: r.parked.park(pc), Replica: r.replica()})
	body, _ := json.Marshal(map[string]any{
		"resultType":    "input_required",
		"inputRequests": requests,
		"requestState":  state,
	})
	return &Reply{Result: body}
}

func (pc *parkedCall) add(a *inputAsk) string {
	pc.mu.Lock()
	defer pc.mu.Unlock()
	pc.nextKey++
	key := "gw-input-" + strconv.Itoa(pc.nextKey)
	pc.outstanding[key] = a
	return key
}

// answer hands the host's inputResponses to the waiting upstream
// requests.
func (pc *parkedCall) answer(responses json.RawMessage) {
	pc.mu.Lock()
	defer pc.mu.Unlock()
	for key, a := range pc.outstanding {
		v, ok := jsonrpc.Field(responses, key)
		if !ok || string(v) == "null" {
			continue // asked again in the next input_required
		}
		a.answer <- &jsonrpc.Message{Result: append(json.RawMessage(nil), v...)}
		delete(pc.outstanding, key)
	}
}

// unanswered returns the keys of the asks still waiting for the host.
func (pc *parkedCall) unanswered() []string {
	pc.mu.Lock()
	defer pc.mu.Unlock()
	return slices.Sorted(mapKeys(pc.outstanding))
}

// requestInput is call.Request for a parked call: the upstream's request
// waits for the host's retry.
func (pc *parkedCall) requestInput(ctx context.Context, req *jsonrpc.Message, capability string) *jsonrpc.Message {
	if !pc.cl.getCaller().declares(capability) {
		select {
		case pc.missing <- capability:
		default:
		}
		return &jsonrpc.Message{Error: jsonrpc.NewError(jsonrpc.CodeInvalidRequest,
			"The host did not declare the %s capability, so the gateway cannot relay %s", capability, req.Method)}
	}
	a := &inputAsk{method: req.Method, params: append(json.RawMessage(nil), req.Params...), answer: make(chan *jsonrpc.Message, 1)}
	select {
	case pc.asks <- a:
	case <-ctx.Done():
		return &jsonrpc.Message{Error: jsonrpc.NewError(jsonrpc.CodeInternalError, "The call ended")}
	}
	select {
	case resp := <-a.answer:
		return resp
	case <-ctx.Done():
		return &jsonrpc.Message{Error: jsonrpc.NewError(jsonrpc.CodeInternalError, "The host did not answer %s in time", req.Method)}
	}
}

// randomTag returns 128 random bits, base64url encoded.
func randomTag() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return base64.RawURLEncoding.EncodeToString(b[:])
}
