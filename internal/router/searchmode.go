package router

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/mcp-gateway/mcp-gateway/internal/jsonrpc"
	"github.com/mcp-gateway/mcp-gateway/internal/search"
)

// Search mode (policy.mode or teams[].mode "search", issue 16): a view's
// tools/list holds only the gateway's tools below instead of its
// catalog, so that a host pays for three definitions, not hundreds, and
// the model finds what it needs and calls it through the gateway. Every
// tool of the view stays callable by its exposed name too. The tools
// read the caller's view only: what the view hides is never indexed, so
// it is neither found, described nor called.
//
// Nothing is kept between requests (a modern host's find and call may
// reach different replicas): the index is a function of the view's
// catalog, built on each replica from the same upstream lists.

// The gateway's tools in search mode. Their names follow the tool name
// rule (at most 64 characters of [A-Za-z0-9_.-]).
const (
	toolFind     = "find_tools"
	toolCall     = "call_tool"
	toolDescribe = "describe_tool"
)

// Limits of find_tools' limit argument.
const (
	findDefaultLimit = 5
	findMaxLimit     = 20
)

// searchToolsJSON is the tools/list of a view in search mode. The
// descriptions are written for a model: find first, then call with the
// exact name and arguments that match the found inputSchema.
const searchToolsJSON = `[` +
	`{"name":"` + toolFind + `","title":"Find tools",` +
	`"description":"Search the tools you can use; they are not listed directly. Call this first with a short description of the task (e.g. \"read a file\", \"create an issue\"), then run a tool you found with call_tool. Returns the best matches, best first, each with its exact name, description, inputSchema and annotations. If none fits, search again with other words.",` +
	`"inputSchema":{"type":"object","properties":{` +
	`"query":{"type":"string","description":"What you want to do, in a few words."},` +
	`"limit":{"type":"integer","minimum":1,"maximum":20,"description":"How many tools to return (default 5)."},` +
	`"upstream":{"type":"string","description":"Only tools of this server."}},` +
	`"required":["query"],"additionalProperties":false},` +
	`"outputSchema":{"type":"object","properties":{"tools":{"type":"array","items":{"type":"object"}},"hint":{"type":"string"}},"required":["tools"]},` +
	`"annotations":{"readOnlyHint":true,"idempotentHint":true,"openWorldHint":false}},` +
	`{"name":"` + toolCall + `","title":"Call a tool",` +
	`"description":"Run a tool found with find_tools: name is its exact name, arguments an object that matches its inputSchema. Returns that tool's own result.",` +
	`"inputSchema":{"type":"object","properties":{` +
	`"name":{"type":"string","description":"The tool's exact name, as find_tools returned it."},` +
	`"arguments":{"type":"object","description":"The tool's arguments."}},` +
	`"required":["name"],"additionalProperties":false}},` +
	`{"name":"` + toolDescribe + `","title":"Describe a tool",` +
	`"description":"Return the full definition of one tool by its exact name, when find_tools' summary is not enough.",` +
	`"inputSchema":{"type":"object","properties":{` +
	`"name":{"type":"string","description":"The tool's exact name."}},` +
	`"required":["name"],"additionalProperties":false},` +
	`"annotations":{"readOnlyHint":true,"idempotentHint":true,"openWorldHint":false}}` +
	`]`

// searchToolDefs are the definitions of the gateway's tools, one by one.
func searchToolDefs() []json.RawMessage {
	var defs []json.RawMessage
	if err := json.Unmarshal([]byte(searchToolsJSON), &defs); err != nil {
		panic("router: searchToolsJSON is not a JSON array: " + err.Error()) // a constant
	}
	return defs
}

// searchListTokens is the estimated size of a search view's tools/list,
// in tokens: its definitions' sizes added up, as a full view's are.
func (r *Router) searchListTokens() int {
	r.searchTokensOnce.Do(func() {
		for _, def := range searchToolDefs() {
			r.searchTokens += r.tokens(def)
		}
	})
	return r.searchTokens
}

// isSearchTool reports whether name is one of the gateway's tools.
func isSearchTool(name string) bool {
	return name == toolFind || name == toolCall || name == toolDescribe
}

// listedTools is the item array of the view's tools/list for c.
func (r *Router) listedTools(c *Caller, v *view) []byte {
	switch {
	case v.exposing():
		return r.exposedTools(c, v)
	case v.search:
		return []byte(searchToolsJSON)
	case v.toolsAsTasksJSON != nil && !c.Modern() && c.takesTasks():
		return v.toolsAsTasksJSON
	}
	return v.toolsJSON
}

// announcedTools is what a tools/list_changed is about: the items hosts
// are listed, as a host that does not take tasks sees them. A view in
// search mode lists the same three tools whatever its catalog, so a
// catalog change alone tells its hosts nothing.
func (v *view) announcedTools() []byte {
	if v.search {
		return []byte(searchToolsJSON)
	}
	return v.toolsJSON
}

// searchCall answers a tools/call of one of the gateway's tools in a
// view in search mode; nil for any other name, which is called directly.
// An upstream tool exposed under the same name (prefix: on_conflict) is
// shadowed on direct calls and reached through call_tool.
func (r *Router) searchCall(ctx context.Context, c *Caller, v *view, req *jsonrpc.Request) *Reply {
	if !req.HasName || !isSearchTool(req.Name) {
		return nil
	}
	args, why := searchArgs(req.Name, req.Arguments)
	if why != "" {
		return toolErrorReply(why)
	}
	switch req.Name {
	case toolFind:
		return r.findTools(c, v, args)
	case toolDescribe:
		return describeTool(v, args)
	}
	return r.callFound(ctx, c, v, req, args)
}

// toolArgs are the arguments of one of the gateway's tools, raw; nil
// when absent.
type toolArgs struct {
	query, limit, upstream, name, arguments json.RawMessage
}

// searchArgNames are the arguments of each of the gateway's tools.
var searchArgNames = map[string][]string{
	toolFind:     {"query", "limit", "upstream"},
	toolCall:     {"name", "arguments"},
	toolDescribe: {"name"},
}

// searchArgs reads the arguments of one of the gateway's tools in one
// walk, by exact member names (encoding/json would match "Query" to
// query); a string that says what is wrong when they do not fit the
// tool's inputSchema. A repeated member is refused here too (the host's
// request was decoded strictly, so none should arrive): the gateway is
// the only reader of these arguments, and reads each one way.
func searchArgs(tool string, raw json.RawMessage) (toolArgs, string) {
	var args toolArgs
	if len(raw) == 0 || string(raw) == "null" {
		return args, ""
	}
	allowed := searchArgNames[tool]
	why := ""
	ok := jsonrpc.EachMember(raw, func(key []byte, value json.RawMessage) bool {
		var slot *json.RawMessage
		switch string(key) {
		case "query":
			slot = &args.query
		case "limit":
			slot = &args.limit
		case "upstream":
			slot = &args.upstream
		case "name":
			slot = &args.name
		case "arguments":
			slot = &args.arguments
		}
		switch {
		case slot == nil || !slices.Contains(allowed, string(key)):
			why = fmt.Sprintf("%s has no argument %q; its arguments are %s", tool, key, strings.Join(allowed, ", "))
		case *slot != nil:
			why = fmt.Sprintf("%s: the argument %q appears more than once", tool, key)
		default:
			*slot = value
			return true
		}
		return false
	})
	if why == "" && !ok {
		why = fmt.Sprintf("%s needs arguments that are an object", tool)
	}
	return args, why
}

// stringArg is a string argument (raw, nil when absent); "" and a
// message when it is absent (and required) or not a string.
func stringArg(tool string, raw json.RawMessage, key string, required bool) (string, string) {
	if raw == nil || string(raw) == "null" {
		if required {
			return "", fmt.Sprintf("%s needs the argument %q (a string)", tool, key)
		}
		return "", ""
	}
	s, ok := jsonrpc.StringValue(raw)
	if !ok {
		return "", fmt.Sprintf("%s: the argument %q must be a string", tool, key)
	}
	if required && strings.TrimSpace(s) == "" {
		return "", fmt.Sprintf("%s: the argument %q must not be empty", tool, key)
	}
	return s, ""
}

// searchIndex is the view's index, built on first use from the tools the
// view lists (after allow/deny, limits and trimming, as hosts would see
// them), and kept with the view: a catalog change builds new views, and
// so a new index.
func (v *view) searchIndex() *search.Index {
	v.searchOnce.Do(func() {
		docs := make([]search.Doc, len(v.tools.entries))
		for i, e := range v.tools.entries {
			docs[i] = searchDoc(e)
		}
		v.index = search.New(docs)
	})
	return v.index
}

// searchDoc is a tool as the index reads it.
func searchDoc(e *entry) search.Doc {
	d := search.Doc{Name: e.exposed, Upstream: e.up.Name}
	d.Title, _ = jsonrpc.StringField(e.def, "title")
	if d.Title == "" {
		if ann, ok := jsonrpc.Field(e.def, "annotations"); ok {
			d.Title, _ = jsonrpc.StringField(ann, "title")
		}
	}
	d.Description, _ = jsonrpc.StringField(e.def, "description")
	var schema struct {
		Properties map[string]struct {
			Description string `json:"description"`
		} `json:"properties"`
	}
	if raw, ok := jsonrpc.Field(e.def, "inputSchema"); ok && json.Unmarshal(raw, &schema) == nil {
		names := make([]string, 0, len(schema.Properties))
		for name := range schema.Properties {
			names = append(names, name)
		}
		slices.Sort(names) // the same index, and scores, every build
		for _, name := range names {
			d.Params = append(d.Params, search.Param{Name: name, Description: schema.Properties[name].Description})
		}
	}
	return d
}

// foundTool is one tool in find_tools' result: what a model needs to
// pick it and call it.
type foundTool struct {
	Name        string          `json:"name"`
	Upstream    string          `json:"upstream"`
	Title       json.RawMessage `json:"title,omitempty"`
	Description json.RawMessage `json:"description,omitempty"`
	InputSchema json.RawMessage `json:"inputSchema,omitempty"`
	Annotations json.RawMessage `json:"annotations,omitempty"`
}

// findTools answers find_tools from the view's index; in a view that
// exposes what it finds, the tools found join c's own tools/list.
func (r *Router) findTools(c *Caller, v *view, args toolArgs) *Reply {
	query, why := stringArg(toolFind, args.query, "query", true)
	if why != "" {
		return toolErrorReply(why)
	}
	upstreamName, why := stringArg(toolFind, args.upstream, "upstream", false)
	if why != "" {
		return toolErrorReply(why)
	}
	limit := findDefaultLimit
	if raw := args.limit; raw != nil && string(raw) != "null" {
		var n float64
		if json.Unmarshal(raw, &n) != nil || n != float64(int(n)) || n < 1 || n > findMaxLimit {
			return toolErrorReply(fmt.Sprintf("%s: the argument \"limit\" must be a whole number from 1 to %d", toolFind, findMaxLimit))
		}
		limit = int(n)
	}
	hits := v.searchIndex().Search(query, limit, upstreamName)
	var out struct {
		Tools []foundTool `json:"tools"`
		Hint  string      `json:"hint,omitempty"`
	}
	out.Tools = make([]foundTool, 0, len(hits))
	for _, h := range hits {
		e := v.tools.entries[h.Doc]
		f := foundTool{Name: e.exposed, Upstream: e.up.Name}
		f.Title, _ = jsonrpc.Field(e.def, "title")
		f.Description, _ = jsonrpc.Field(e.def, "description")
		f.InputSchema, _ = jsonrpc.Field(e.def, "inputSchema")
		f.Annotations, _ = jsonrpc.Field(e.def, "annotations")
		out.Tools = append(out.Tools, f)
	}
	kept := false
	if v.exposing() {
		names := make([]string, len(hits))
		for i, h := range hits {
			names[i] = v.tools.entries[h.Doc].exposed
		}
		kept = r.expose(c, v, names)
	}
	if len(hits) == 0 {
		out.Hint = "No tool matched. Search again with other or fewer words, or without upstream."
	} else if kept {
		out.Hint = "These tools are now in your tool list too: call one directly by its name, or with call_tool, with arguments that match its inputSchema."
	} else {
		out.Hint = "Run one with call_tool, giving its exact name and arguments that match its inputSchema."
	}
	body, err := json.Marshal(out)
	if err != nil {
		// The members are raw JSON from definitions the gateway parsed.
		return toolErrorReply("find_tools could not encode its result")
	}
	return structuredResult(body)
}

// structuredResult is a tool result with body (a JSON object) as its
// text content and as its structuredContent (2025-06-18 server/tools
// "Structured Content": a tool with an outputSchema returns both).
func structuredResult(body []byte) *Reply {
	out := make([]byte, 0, 2*len(body)+64)
	out = append(out, `{"content":[{"type":"text","text":`...)
	out = jsonrpc.AppendString(out, string(body))
	out = append(out, `}],"structuredContent":`...)
	out = append(out, body...)
	return &Reply{Result: append(out, '}'), LacksResultType: true}
}

// describeTool answers describe_tool: a tool's definition as the view's
// tools/list in full mode would hold it.
func describeTool(v *view, args toolArgs) *Reply {
	name, why := stringArg(toolDescribe, args.name, "name", true)
	if why != "" {
		return toolErrorReply(why)
	}
	e := v.tools.byName[name]
	if e == nil {
		return toolErrorReply(fmt.Sprintf("Unknown tool: %s. Use find_tools to find the tools you can use, and their exact names.", name))
	}
	out := []byte(`{"content":[{"type":"text","text":`)
	out = jsonrpc.AppendString(out, string(e.def))
	return &Reply{Result: append(out, `}]}`...), LacksResultType: true}
}

// callFound answers call_tool: the request becomes a direct tools/call
// of the named tool (params.name and params.arguments replaced, every
// other member, _meta and its progressToken included, kept; the tool's
// arguments passed on as the host wrote them) and is dispatched through
// the same path as one, so that policy, limits, progress, cancellation,
// server requests and tasks are the same, and a tool the view does not
// show gets the same answer. The host's request was decoded strictly as
// a whole, so the arguments passed on are I-JSON, as a direct call's
// are, and the direct path checks them as it checks those.
func (r *Router) callFound(ctx context.Context, c *Caller, v *view, req *jsonrpc.Request, args toolArgs) *Reply {
	name, why := stringArg(toolCall, args.name, "name", true)
	if why != "" {
		return toolErrorReply(why)
	}
	arguments := args.arguments
	if string(arguments) == "null" {
		arguments = nil
	}
	if arguments != nil && arguments[0] != '{' {
		return toolErrorReply(toolCall + ": the argument \"arguments\" must be an object, the tool's arguments")
	}
	if isSearchTool(name) && v.tools.byName[name] == nil {
		// No recursion: only an upstream's tool of that name (prefix:
		// on_conflict) is called through call_tool.
		return toolErrorReply(fmt.Sprintf("%s runs the tools find_tools finds; %s is the gateway's own tool: call it directly.", toolCall, name))
	}
	return r.callNamed(ctx, c, req.WithCall(name, arguments), v.tools, "tool")
}
