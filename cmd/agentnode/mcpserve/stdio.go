package mcpserve

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strconv"
	"strings"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentnode/agentnode/kernel/bounded"
)

// MaxDepth bounds how deeply one inbound message may nest (the go-sdk's
// own decoder refuses more than 1000 levels; arguments are bounded again,
// tighter, by plan.CheckInput).
const MaxDepth = 1000

// batchVersion is the first MCP version without JSON-RPC batching
// (2025-06-18 removed it; 2024-11-05 and 2025-03-26 require receivers to
// accept batches).
const batchVersion = "2025-06-18"

// StdioTransport is the stdio transport of `agentnode mcp serve`:
// newline-delimited JSON-RPC 2.0, one message per line, in front of the
// go-sdk server. It reads each line (at most MaxFrame bytes), classifies
// it, answers whatever is not a valid message itself (-32700 parse error,
// -32600 invalid request, -32602 invalid params, in the client's terms)
// and passes only valid messages on, so no input ends the session: only
// the end of the stream or Close does. At the end of the stream it waits
// until every request already passed on has been answered (the calls run
// to their end and are audited) before it reports EOF. Error answers the
// go-sdk writes with Go type names in them are reworded before they are
// sent.
type StdioTransport struct {
	Reader io.ReadCloser
	Writer io.WriteCloser
	// MaxFrame bounds one line, its newline excluded (0: MaxFrame).
	MaxFrame int
	// Log receives one line per invalid notification dropped (nil: none).
	Log io.Writer
}

// Connect implements mcp.Transport.
func (t *StdioTransport) Connect(context.Context) (mcp.Connection, error) {
	max := t.MaxFrame
	if max <= 0 {
		max = MaxFrame
	}
	log := t.Log
	if log == nil {
		log = io.Discard
	}
	c := &stdioConn{
		r: t.Reader, w: t.Writer, log: log, max: max,
		lines:    make(chan frame),
		closed:   make(chan struct{}),
		pending:  map[jsonrpc.ID]string{},
		answered: make(chan struct{}),
		batches:  map[jsonrpc.ID]*batch{},
	}
	go c.readLoop()
	return c, nil
}

type stdioConn struct {
	r   io.ReadCloser
	w   io.WriteCloser
	log io.Writer
	max int // bound of one line

	lines     chan frame
	closed    chan struct{}
	closeOnce sync.Once
	closeErr  error

	// Read side only (the go-sdk serializes reads).
	queue   []jsonrpc.Message // the rest of a batch
	readErr error

	// mu serializes writes and guards the rest.
	mu sync.Mutex
	// pending are the calls passed on and not answered yet (id -> method).
	pending map[jsonrpc.ID]string
	// answered is closed (and replaced) whenever a pending call is answered.
	answered chan struct{}
	initID   *jsonrpc.ID
	version  string // the negotiated MCP version ("" before initialize)
	batches  map[jsonrpc.ID]*batch
}

// frame is one line read (or the read error that ended the stream).
type frame struct {
	line    []byte
	tooLong bool
	err     error
}

// batch collects the answers of one inbound batch, sent as one array.
type batch struct {
	responses  []*jsonrpc.Response // nil: not answered yet
	index      map[jsonrpc.ID]int
	unresolved int
}

func (c *stdioConn) readLoop() {
	br := bufio.NewReaderSize(c.r, 64<<10)
	for {
		line, tooLong, err := readLine(br, c.max)
		if len(line) > 0 || tooLong {
			select {
			case c.lines <- frame{line: line, tooLong: tooLong}:
			case <-c.closed:
				return
			}
		}
		if err != nil {
			select {
			case c.lines <- frame{err: err}:
			case <-c.closed:
			}
			return
		}
	}
}

// readLine returns the next line without its line end. A line longer than
// max is read to its end but not kept (tooLong). A last line without a
// newline is a line.
func readLine(br *bufio.Reader, max int) (line []byte, tooLong bool, err error) {
	for {
		frag, err := br.ReadSlice('\n')
		if !tooLong {
			if len(line)+len(frag) > max+2 { // room for "\r\n"
				tooLong, line = true, nil
			} else {
				line = append(line, frag...)
			}
		}
		if err == bufio.ErrBufferFull {
			continue
		}
		line = bytes.TrimRight(line, "\r\n")
		if len(line) > max {
			tooLong, line = true, nil
		}
		return line, tooLong, err
	}
}

// Read implements mcp.Connection: the next valid message.
func (c *stdioConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	for {
		if len(c.queue) > 0 {
			m := c.queue[0]
			c.queue = c.queue[1:]
			return m, nil
		}
		if c.readErr != nil {
			return nil, c.readErr
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-c.closed:
			return nil, io.EOF
		case f := <-c.lines:
			if f.err != nil {
				// The client stopped sending: answer what it asked first.
				c.drain(ctx)
				c.readErr = f.err
				return nil, f.err
			}
			c.queue = c.classify(f)
		}
	}
}

// drain waits until every call passed on has been answered, the connection
// is closed or ctx is done.
func (c *stdioConn) drain(ctx context.Context) {
	for {
		c.mu.Lock()
		n, ch := len(c.pending), c.answered
		c.mu.Unlock()
		if n == 0 {
			return
		}
		select {
		case <-ch:
		case <-c.closed:
			return
		case <-ctx.Done():
			return
		}
	}
}

// classify answers an invalid line and returns the messages to pass on.
func (c *stdioConn) classify(f frame) []jsonrpc.Message {
	if f.tooLong {
		c.send(errorResponse(jsonrpc.ID{}, jsonrpc.CodeInvalidRequest,
			fmt.Sprintf("invalid request: the message is longer than %d bytes", c.max)))
		return nil
	}
	b := bytes.TrimSpace(f.line)
	if len(b) == 0 {
		return nil
	}
	if resp := syntaxCheck(b); resp != nil {
		c.send(resp)
		return nil
	}
	if b[0] == '[' {
		return c.batch(b)
	}
	msg, resp := c.check(b)
	if resp != nil {
		c.send(resp)
	}
	if msg == nil {
		return nil
	}
	return []jsonrpc.Message{msg}
}

// syntaxCheck answers a line that is not JSON, or nests too deeply.
func syntaxCheck(b []byte) *jsonrpc.Response {
	if err := bounded.JSONDepth(b, MaxDepth); err != nil {
		return errorResponse(jsonrpc.ID{}, jsonrpc.CodeInvalidRequest,
			fmt.Sprintf("invalid request: nested deeper than %d levels", MaxDepth))
	}
	if json.Valid(b) {
		return nil
	}
	var v any
	if err := json.Unmarshal(b, &v); err != nil { // for where it breaks
		msg := "parse error: not valid JSON"
		var se *json.SyntaxError
		if errors.As(err, &se) {
			msg = fmt.Sprintf("parse error: not valid JSON at byte %d: %s", se.Offset, se.Error())
		}
		return errorResponse(jsonrpc.ID{}, jsonrpc.CodeParseError, msg)
	}
	return nil
}

// batch handles a JSON array: refused from MCP 2025-06-18 on (and before
// initialize), else each element is checked and passed on, and the answers
// go back as one array.
func (c *stdioConn) batch(b []byte) []jsonrpc.Message {
	var elems []json.RawMessage
	if err := json.Unmarshal(b, &elems); err != nil || len(elems) == 0 {
		c.send(errorResponse(jsonrpc.ID{}, jsonrpc.CodeInvalidRequest, "invalid request: an empty batch"))
		return nil
	}
	c.mu.Lock()
	version := c.version
	c.mu.Unlock()
	if version == "" || version >= batchVersion {
		in := "no version negotiated yet"
		if version != "" {
			in = "this session: MCP " + version
		}
		c.send(errorResponse(jsonrpc.ID{}, jsonrpc.CodeInvalidRequest, fmt.Sprintf(
			"invalid request: JSON-RPC batches are not part of MCP %s and later (%s): send one message per line", batchVersion, in)))
		return nil
	}
	bt := &batch{index: map[jsonrpc.ID]int{}}
	var out []jsonrpc.Message
	for _, e := range elems {
		msg, resp := c.check(e)
		if resp != nil {
			bt.responses = append(bt.responses, resp)
		}
		if req, ok := msg.(*jsonrpc.Request); ok && req.IsCall() {
			if _, dup := bt.index[req.ID]; !dup {
				bt.index[req.ID] = len(bt.responses)
				bt.responses = append(bt.responses, nil)
				bt.unresolved++
			}
		}
		if msg != nil {
			out = append(out, msg)
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if bt.unresolved == 0 {
		if len(bt.responses) > 0 {
			_ = c.writeBatchLocked(bt.responses)
		}
		return out
	}
	for id := range bt.index {
		c.batches[id] = bt
	}
	return out
}

// wireMessage is a message as sent, for checking.
type wireMessage struct {
	JSONRPC json.RawMessage `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Method  json.RawMessage `json:"method"`
	Params  json.RawMessage `json:"params"`
	Result  json.RawMessage `json:"result"`
	Error   json.RawMessage `json:"error"`
}

// check classifies one JSON value: a message to pass on, or the answer to
// send (or, for an invalid notification, neither).
func (c *stdioConn) check(b []byte) (jsonrpc.Message, *jsonrpc.Response) {
	b = bytes.TrimSpace(b)
	if len(b) == 0 || b[0] != '{' {
		return nil, errorResponse(jsonrpc.ID{}, jsonrpc.CodeInvalidRequest,
			"invalid request: a JSON-RPC message is a JSON object, not "+jsonKind(b))
	}
	var w wireMessage
	if err := json.Unmarshal(b, &w); err != nil {
		return nil, errorResponse(jsonrpc.ID{}, jsonrpc.CodeInvalidRequest, "invalid request: not a JSON-RPC message")
	}
	id, hasID, idErr := parseID(w.ID)
	if idErr != "" {
		return nil, errorResponse(jsonrpc.ID{}, jsonrpc.CodeInvalidRequest, "invalid request: "+idErr)
	}
	invalid := func(code int64, msg string) (jsonrpc.Message, *jsonrpc.Response) {
		return nil, errorResponse(id, code, msg)
	}
	if string(w.JSONRPC) != `"2.0"` {
		if len(w.JSONRPC) == 0 {
			return invalid(jsonrpc.CodeInvalidRequest, `invalid request: "jsonrpc" is missing; it must be "2.0"`)
		}
		return invalid(jsonrpc.CodeInvalidRequest, fmt.Sprintf(`invalid request: "jsonrpc" is %s; it must be "2.0"`, clip(w.JSONRPC)))
	}
	if len(w.Method) == 0 {
		if !hasID {
			return invalid(jsonrpc.CodeInvalidRequest, `invalid request: neither a request (no "method") nor a response (no "id")`)
		}
		if len(w.Result) == 0 && len(w.Error) == 0 {
			return invalid(jsonrpc.CodeInvalidRequest, `invalid request: a request needs a "method", a response a "result" or an "error"`)
		}
		msg, err := jsonrpc.DecodeMessage(b)
		if err != nil {
			return invalid(jsonrpc.CodeInvalidRequest, "invalid request: not a valid JSON-RPC response")
		}
		return msg, nil
	}
	var method string
	if err := json.Unmarshal(w.Method, &method); err != nil {
		return invalid(jsonrpc.CodeInvalidRequest, `invalid request: "method" must be a string, not `+jsonKind(w.Method))
	}
	// From here on the message is a well-formed request: a notification
	// (no id) is never answered, even when its params are wrong.
	dropNote := func(why string) (jsonrpc.Message, *jsonrpc.Response) {
		fmt.Fprintf(c.log, "agentnode mcp: dropped notification %q: %s\n", method, why)
		return nil, nil
	}
	if why := checkParams(method, w.Params); why != "" {
		if !hasID {
			return dropNote(why)
		}
		return invalid(jsonrpc.CodeInvalidParams, why)
	}
	msg, err := jsonrpc.DecodeMessage(b)
	if err != nil {
		if !hasID {
			return dropNote("not a valid JSON-RPC request")
		}
		return invalid(jsonrpc.CodeInvalidRequest, "invalid request: not a valid JSON-RPC request")
	}
	// What is tracked is what the go-sdk decoded (a message with keys
	// twice, or in other cases, may read differently here).
	if req, ok := msg.(*jsonrpc.Request); ok && req.IsCall() {
		id, method = req.ID, req.Method
		c.mu.Lock()
		if _, busy := c.pending[id]; busy {
			c.mu.Unlock()
			return nil, errorResponse(jsonrpc.ID{}, jsonrpc.CodeInvalidRequest,
				fmt.Sprintf("invalid request: id %v is already in use by a request not answered yet", id.Raw()))
		}
		c.pending[id] = method
		if method == "initialize" {
			c.initID = &id
		}
		c.mu.Unlock()
	}
	return msg, nil
}

// parseID returns a message's id. MCP ids are strings or integers, never
// null.
func parseID(raw json.RawMessage) (id jsonrpc.ID, present bool, problem string) {
	if len(raw) == 0 {
		return jsonrpc.ID{}, false, ""
	}
	switch raw[0] {
	case '"':
		var s string
		if json.Unmarshal(raw, &s) == nil {
			id, _ = jsonrpc.MakeID(s)
			return id, true, ""
		}
	case 'n':
		return jsonrpc.ID{}, true, `"id" must be a string or an integer, not null`
	default:
		if n, err := strconv.ParseInt(string(raw), 10, 64); err == nil && n > -(1<<53) && n < 1<<53 {
			id, _ = jsonrpc.MakeID(float64(n))
			return id, true, ""
		}
	}
	return jsonrpc.ID{}, true, `"id" must be a string or an integer, not ` + clip(raw)
}

// paramTypes are the params of the requests the server answers, to check
// them before the go-sdk decodes them (and words its errors in Go).
var paramTypes = map[string]func() any{
	"initialize": func() any { return new(mcp.InitializeParams) },
	"tools/list": func() any { return new(mcp.ListToolsParams) },
	"tools/call": func() any { return new(mcp.CallToolParamsRaw) },
	"ping":       func() any { return new(map[string]json.RawMessage) },
}

// checkParams says what is wrong with a request's params ("": nothing
// this layer can see).
func checkParams(method string, params json.RawMessage) string {
	if len(params) == 0 || string(params) == "null" {
		return ""
	}
	if params[0] != '{' {
		return "invalid params: params must be a JSON object, not " + jsonKind(params)
	}
	newParams, ok := paramTypes[method]
	if !ok {
		return ""
	}
	err := json.Unmarshal(params, newParams())
	var te *json.UnmarshalTypeError
	switch {
	case err == nil:
		return ""
	case errors.As(err, &te):
		field := "params"
		if te.Field != "" {
			field = "params." + te.Field
		}
		got, _, _ := strings.Cut(te.Value, " ")
		if got == "bool" {
			got = "boolean"
		}
		return fmt.Sprintf("invalid params: %s must be %s, not %s", field, typeKind(te.Type), article(got))
	default:
		return fmt.Sprintf("invalid params for %q", method)
	}
}

// typeKind is the JSON kind a Go type decodes from.
func typeKind(t reflect.Type) string {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == nil {
		return "a JSON value"
	}
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "a boolean"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return "an integer"
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "a non-negative integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Slice, reflect.Array:
		return "an array"
	case reflect.Map, reflect.Struct:
		return "an object"
	}
	return "a different JSON value"
}

// jsonKind names the kind of a JSON value, with its article.
func jsonKind(b []byte) string {
	b = bytes.TrimSpace(b)
	if len(b) == 0 {
		return "empty"
	}
	switch b[0] {
	case '{':
		return "an object"
	case '[':
		return "an array"
	case '"':
		return "a string"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	}
	return "a number"
}

func article(kind string) string {
	switch kind {
	case "null", "":
		return kind
	case "array", "object":
		return "an " + kind
	}
	return "a " + kind
}

// clip quotes at most 40 bytes of a raw JSON value for a message.
func clip(raw json.RawMessage) string {
	if len(raw) > 40 {
		return string(raw[:40]) + "…"
	}
	return string(raw)
}

func errorResponse(id jsonrpc.ID, code int64, msg string) *jsonrpc.Response {
	return &jsonrpc.Response{ID: id, Error: &jsonrpc.Error{Code: code, Message: msg}}
}

// goInternals are what the go-sdk's decoding errors say in Go terms.
var goInternals = []string{"Go struct field", "Go value of type", "into a *", "unmarshaling", "json: "}

// reword replaces an error answer that speaks Go with one in the client's
// terms (the code stays).
func reword(resp *jsonrpc.Response, method string) {
	msg := resp.Error.Error()
	for _, s := range goInternals {
		if strings.Contains(msg, s) {
			var code int64 = jsonrpc.CodeInvalidParams
			var we *jsonrpc.Error
			if errors.As(resp.Error, &we) {
				code = we.Code
			}
			resp.Error = &jsonrpc.Error{Code: code, Message: fmt.Sprintf("invalid params for %q", method)}
			return
		}
	}
}

// send writes an answer of this layer.
func (c *stdioConn) send(resp *jsonrpc.Response) {
	c.mu.Lock()
	defer c.mu.Unlock()
	_ = c.writeLocked(resp)
}

// writeLocked writes one message. Errors are the go-sdk's to see on its
// next write (an answer of this layer that cannot be written is lost with
// the stream).
func (c *stdioConn) writeLocked(msg jsonrpc.Message) error {
	data, err := encode(msg)
	if err != nil {
		return err
	}
	_, err = c.w.Write(append(data, '\n'))
	return err
}

// encode is jsonrpc.EncodeMessage, except that an error answer to a
// message whose id could not be read carries "id": null, as JSON-RPC 2.0
// requires (the go-sdk leaves the id out).
func encode(msg jsonrpc.Message) ([]byte, error) {
	if r, ok := msg.(*jsonrpc.Response); ok && !r.ID.IsValid() && r.Error != nil {
		we := &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: r.Error.Error()}
		var inner *jsonrpc.Error
		if errors.As(r.Error, &inner) {
			we.Code = inner.Code
		}
		b, err := json.Marshal(struct {
			JSONRPC string         `json:"jsonrpc"`
			ID      *struct{}      `json:"id"`
			Error   *jsonrpc.Error `json:"error"`
		}{"2.0", nil, we})
		if err != nil {
			return nil, fmt.Errorf("encode answer: %w", err)
		}
		return b, nil
	}
	b, err := jsonrpc.EncodeMessage(msg)
	if err != nil {
		return nil, fmt.Errorf("encode message: %w", err)
	}
	return b, nil
}

// writeBatchLocked writes the answers to a batch as one array.
func (c *stdioConn) writeBatchLocked(resps []*jsonrpc.Response) error {
	raws := make([]json.RawMessage, 0, len(resps))
	for _, r := range resps {
		b, err := encode(r)
		if err != nil {
			return err
		}
		raws = append(raws, b)
	}
	data, err := json.Marshal(raws)
	if err != nil {
		return fmt.Errorf("encode batch answer: %w", err)
	}
	_, err = c.w.Write(append(data, '\n'))
	return err
}

// Write implements mcp.Connection.
func (c *stdioConn) Write(ctx context.Context, msg jsonrpc.Message) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	resp, ok := msg.(*jsonrpc.Response)
	if !ok {
		return c.writeLocked(msg)
	}
	method, wasPending := c.pending[resp.ID]
	if wasPending {
		delete(c.pending, resp.ID)
		defer func() { // after the answer is written
			close(c.answered)
			c.answered = make(chan struct{})
		}()
	}
	if resp.Error != nil {
		reword(resp, method)
	}
	if c.initID != nil && *c.initID == resp.ID && resp.Error == nil {
		var r struct {
			ProtocolVersion string `json:"protocolVersion"`
		}
		if json.Unmarshal(resp.Result, &r) == nil {
			c.version = r.ProtocolVersion
		}
		c.initID = nil
	}
	if bt := c.batches[resp.ID]; bt != nil {
		delete(c.batches, resp.ID)
		bt.responses[bt.index[resp.ID]] = resp
		if bt.unresolved--; bt.unresolved > 0 {
			return nil
		}
		return c.writeBatchLocked(bt.responses)
	}
	return c.writeLocked(resp)
}

// Close implements mcp.Connection.
func (c *stdioConn) Close() error {
	c.closeOnce.Do(func() {
		close(c.closed)
		c.closeErr = errors.Join(c.r.Close(), c.w.Close())
	})
	return c.closeErr
}

// SessionID implements mcp.Connection: stdio has no session id.
func (*stdioConn) SessionID() string { return "" }
