package parse

import (
	"fmt"
	"strings"
)

// chatBody is a typical chat completions request of about 1 KiB, with a session_id.
const chatBody = `{
  "model": "model-x",
  "messages": [
    {"role": "system", "content": "You are a helpful assistant. Answer briefly and cite the documentation where you can. Use metric units."},
    {"role": "user", "content": "What is the difference between a rendezvous hash and a ring hash with virtual nodes, and when would I prefer one over the other for session affinity?"},
    {"role": "assistant", "content": "Rendezvous (highest random weight) hashing scores every node for each key and picks the best; it needs no virtual nodes and moves only the keys of a node that leaves.\nA ring with virtual nodes is O(log n) per lookup instead of O(n)."},
    {"role": "user", "content": "Thanks. Which one spreads \"hot\" sessions more evenly with 3 to 10 upstreams? Please include a short example in Go, with tabs\tand unicode: é, 模型."}
  ],
  "temperature": 0.7,
  "max_tokens": 1024,
  "top_p": 1,
  "stream": true,
  "stream_options": {"include_usage": true},
  "session_id": "sess_01HZX3K9Q7W8E5R4T2Y6U1I0OP",
  "user": "team-a"
}`

// sseStream is a Responses stream of 20 events.
var sseStream = func() string {
	var b strings.Builder
	b.WriteString("event: response.created\ndata: {\"type\":\"response.created\",\"sequence_number\":0,\"response\":{\"id\":\"resp_1\",\"object\":\"response\",\"status\":\"in_progress\",\"output\":[]}}\n\n")
	for i := 1; i < 19; i++ {
		fmt.Fprintf(&b, "event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"sequence_number\":%d,\"item_id\":\"msg_1\",\"output_index\":0,\"content_index\":0,\"delta\":\"word%d \"}\n\n", i, i)
	}
	b.WriteString("event: response.completed\ndata: {\"type\":\"response.completed\",\"sequence_number\":19,\"response\":{\"id\":\"resp_1\",\"object\":\"response\",\"status\":\"completed\"}}\n\n")
	return b.String()
}()
