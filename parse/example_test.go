package parse_test

import (
	"fmt"

	"github.com/modelgate/gateway/parse"
)

func ExamplePeek() {
	body := []byte(`{"model":"model-x","session_id":"sess-1","messages":[],"stream":true}`)
	var f parse.Fields // or from a sync.Pool
	if err := parse.Peek(body, &f); err != nil {
		fmt.Println(err) // the message is meant for the client
		return
	}
	fmt.Printf("model=%s session=%s stream=%v\n", f.Model, f.SessionID, f.Stream)
	if f.HasSessionID() {
		upstream := parse.AppendWithoutSessionID(nil, body, &f) // or into a pooled buffer
		fmt.Printf("%s\n", upstream)
	}
	// Output:
	// model=model-x session=sess-1 stream=true
	// {"model":"model-x","messages":[],"stream":true}
}

func ExamplePeek_error() {
	var f parse.Fields
	fmt.Println(parse.Peek([]byte(`{"model":"m","session_id":42}`), &f))
	fmt.Println(parse.Peek([]byte(`{"model":"m",}`), &f))
	// Output:
	// session_id must be a string
	// request body is not valid JSON: expected a string key at byte 13
}

func ExampleMember() {
	answer := []byte(`{"id":"resp_1","object":"response","output":[]}`)
	id, err := parse.StringValue(nil, parse.Member(answer, "id"))
	fmt.Printf("%s %v\n", id, err)

	event := []byte(`{"type":"response.created","response":{"id":"resp_2"}}`)
	fmt.Printf("%s\n", parse.Member(parse.Member(event, "response"), "id"))
	// Output:
	// resp_1 <nil>
	// "resp_2"
}

func ExampleScanner() {
	// A stream arriving in reads that cut lines anywhere.
	reads := []string{"event: response.cre", "ated\ndata: {\"response\":{\"id\":\"resp_1\"}}\n", "\nevent: response.completed\r\ndata: {}\r\n\r\n"}
	s := parse.NewScanner(64 << 10)
	for _, r := range reads {
		s.Feed([]byte(r)) // the read buffer must stay unchanged until Next reports !ok
		for {
			ev, ok, err := s.Next()
			if err != nil {
				fmt.Println(err)
				return
			}
			if !ok {
				break
			}
			fmt.Printf("%s: %s\n", ev.Name, ev.Data)
		}
	}
	// Output:
	// response.created: {"response":{"id":"resp_1"}}
	// response.completed: {}
}
