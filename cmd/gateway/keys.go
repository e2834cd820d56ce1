package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"
)

// The keys command: the admin API of the callers' keys (docs/keys.md) from a shell.
//
//	gateway keys create|list|get|update|block|unblock|rotate|delete [ID] [flags]

// adminTokenEnv names the environment variable that holds the admin token.
const adminTokenEnv = "GATEWAY_ADMIN_TOKEN"

const keysUsageText = `Usage: gateway keys COMMAND [ID] [flags]

Manage callers' keys through a gateway's admin API (docs/keys.md). The admin token is
read from $GATEWAY_ADMIN_TOKEN. create and rotate print the new secret once: keep it.

Commands:
  create                  make a key: -id, -name, -models, -expires, -metadata, -limits
  list                    list keys: -name (prefix), -after, -limit
  get ID                  show one key
  update ID               change -name, -models, -expires, -metadata, -limits
                          (an empty value clears it)
  block ID, unblock ID    refuse or accept the key again
  rotate ID               a new secret; the old one works for -overlap (default 0s)
  delete ID               revoke the key

Flags:
`

// keysFlags are the flags of every keys command; each takes the ones it needs.
type keysFlags struct {
	admin, id, name, models, expires, metadata, limits, after, overlap string
	budget, budgets                                                    string
	limit                                                              int
	set                                                                map[string]bool
}

func keysCommand(args []string, stdout, stderr io.Writer) error {
	var kf keysFlags
	fs := flag.NewFlagSet("gateway keys", flag.ContinueOnError)
	fs.StringVar(&kf.admin, "admin", "http://"+defaultAdminListen, "`URL` of the gateway's admin listener")
	fs.StringVar(&kf.id, "id", "", "create: the key's `id` (default: chosen by the gateway)")
	fs.StringVar(&kf.name, "name", "", "the key's `name`; list: a name prefix")
	fs.StringVar(&kf.models, "models", "", "comma-separated model ids or globs the key may call (`list`; default every model)")
	fs.StringVar(&kf.expires, "expires", "", "when the key stops working: RFC 3339 `time` or a duration from now (720h)")
	fs.StringVar(&kf.metadata, "metadata", "", "comma-separated `k=v` pairs")
	fs.StringVar(&kf.limits, "limits", "", "rate limits as `JSON`, e.g. {\"requests_per_minute\":600}")
	fs.StringVar(&kf.budget, "budget", "", "the key's own money budget as `USD[/period]`, e.g. 100/month (day, week, month, total: the default)")
	fs.StringVar(&kf.budgets, "budgets", "", "comma-separated `names` of the config's budgets the key also spends")
	fs.StringVar(&kf.after, "after", "", "list: the `id` after which the page starts")
	fs.IntVar(&kf.limit, "limit", 0, "list: the page's size, 1..1000")
	fs.StringVar(&kf.overlap, "overlap", "", "rotate: how long the old secret keeps working (`duration`, e.g. 10m)")
	usage := func(w io.Writer, fs *flag.FlagSet) {
		fmt.Fprint(w, keysUsageText)
		fs.SetOutput(w)
		fs.PrintDefaults()
	}
	if len(args) == 0 || strings.HasPrefix(args[0], "-") {
		usage(stderr, fs)
		return usageError{"keys needs a command: create, list, get, update, block, unblock, rotate or delete"}
	}
	cmd, rest := args[0], args[1:]
	var id string
	if len(rest) > 0 && !strings.HasPrefix(rest[0], "-") {
		id, rest = rest[0], rest[1:]
	}
	if err := parseFlags(fs, rest, stdout, stderr, usage); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	kf.set = map[string]bool{}
	fs.Visit(func(f *flag.Flag) { kf.set[f.Name] = true })
	method, path, body, err := kf.request(cmd, id)
	if err != nil {
		return err
	}
	return adminRequest(kf.admin, method, path, body, stdout)
}

// request returns the API call of cmd on id.
func (kf *keysFlags) request(cmd, id string) (method, path string, body []byte, err error) {
	known := false
	for _, c := range []string{"create", "list", "get", "update", "block", "unblock", "rotate", "delete"} {
		known = known || c == cmd
	}
	needsID := cmd != "create" && cmd != "list"
	switch {
	case !known:
		return "", "", nil, usageError{fmt.Sprintf("unknown keys command %q: create, list, get, update, block, unblock, rotate or delete", cmd)}
	case needsID && id == "":
		return "", "", nil, usageError{"keys " + cmd + " needs the key's id: gateway keys " + cmd + " ID"}
	case !needsID && id != "":
		return "", "", nil, usageError{"keys " + cmd + " takes no id argument"}
	}
	base := "/admin/v1/keys"
	one := base + "/" + url.PathEscape(id)
	switch cmd {
	case "create", "update":
		body, err = kf.keyBody(cmd == "create")
		if cmd == "create" {
			return "POST", base, body, err
		}
		return "PATCH", one, body, err
	case "list":
		q := url.Values{}
		for k, v := range map[string]string{"name": kf.name, "after": kf.after} {
			if v != "" {
				q.Set(k, v)
			}
		}
		if kf.limit != 0 {
			q.Set("limit", fmt.Sprint(kf.limit))
		}
		return "GET", base + "?" + q.Encode(), nil, nil
	case "get":
		return "GET", one, nil, nil
	case "delete":
		return "DELETE", one, nil, nil
	case "block", "unblock":
		return "POST", one + "/" + cmd, nil, nil
	case "rotate":
		if kf.overlap != "" {
			body, _ = json.Marshal(map[string]string{"overlap": kf.overlap})
		}
		return "POST", one + "/rotate", body, nil
	}
	panic("BUG: keys command " + cmd + " known but not handled")
}

// keyBody is the body of a create or an update from the flags set; an empty value of
// an update clears the field.
func (kf *keysFlags) keyBody(create bool) ([]byte, error) {
	b := map[string]any{}
	if create && kf.id != "" {
		b["id"] = kf.id
	}
	str := func(flagName, field, v string, conv func(string) (any, error)) error {
		if !kf.set[flagName] {
			return nil
		}
		if v == "" {
			b[field] = nil
			return nil
		}
		x, err := conv(v)
		if err != nil {
			return fmt.Errorf("-%s: %w", flagName, err)
		}
		b[field] = x
		return nil
	}
	errs := []error{
		str("name", "name", kf.name, func(s string) (any, error) { return s, nil }),
		str("models", "models", kf.models, func(s string) (any, error) { return strings.Split(s, ","), nil }),
		str("expires", "expires_at", kf.expires, expiryOf),
		str("metadata", "metadata", kf.metadata, metadataOf),
		str("limits", "limits", kf.limits, func(s string) (any, error) {
			var v json.RawMessage
			return v, json.Unmarshal([]byte(s), &v)
		}),
		str("budget", "budget", kf.budget, budgetOf),
		str("budgets", "budgets", kf.budgets, func(s string) (any, error) { return strings.Split(s, ","), nil }),
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return json.Marshal(b)
}

func expiryOf(s string) (any, error) {
	if d, err := time.ParseDuration(s); err == nil {
		return time.Now().Add(d).UTC().Format(time.RFC3339), nil
	}
	if _, err := time.Parse(time.RFC3339, s); err != nil {
		return nil, fmt.Errorf("expected an RFC 3339 time or a duration, not %q", s)
	}
	return s, nil
}

// budgetOf reads USD[/period] (no period: total, the gateway's default); the
// gateway checks the amount and the period, as it checks the config's.
func budgetOf(s string) (any, error) {
	usd, period, slash := strings.Cut(s, "/")
	if usd == "" || (slash && period == "") {
		return nil, fmt.Errorf("expected USD or USD/period, e.g. 100/month, not %q", s)
	}
	b := map[string]string{"usd": usd}
	if slash {
		b["period"] = period
	}
	return b, nil
}

func metadataOf(s string) (any, error) {
	m := map[string]string{}
	for _, kv := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			return nil, fmt.Errorf("expected k=v pairs, not %q", kv)
		}
		m[k] = v
	}
	return m, nil
}

// adminRequest sends one call to the admin API and prints its answer, indented; an
// answer other than 2xx is an error with the API's message.
func adminRequest(admin, method, path string, body []byte, stdout io.Writer) error {
	token := os.Getenv(adminTokenEnv)
	if token == "" {
		return fmt.Errorf("no admin token: set $%s", adminTokenEnv)
	}
	req, err := http.NewRequest(method, strings.TrimRight(admin, "/")+path, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("-admin: %w", err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	c := http.Client{Timeout: 30 * time.Second}
	resp, err := c.Do(req)
	if err != nil {
		return fmt.Errorf("cannot reach the admin API: %w", err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return fmt.Errorf("cannot read the admin API's answer: %w", err)
	}
	if resp.StatusCode/100 != 2 {
		var e struct {
			Error struct{ Message, Field string }
		}
		if json.Unmarshal(b, &e) == nil && e.Error.Message != "" {
			if e.Error.Field != "" {
				return fmt.Errorf("%s: %s: %s", resp.Status, e.Error.Field, e.Error.Message)
			}
			return fmt.Errorf("%s: %s", resp.Status, e.Error.Message)
		}
		return fmt.Errorf("%s: %s", resp.Status, bytes.TrimSpace(b))
	}
	var out bytes.Buffer
	if json.Indent(&out, b, "", "  ") != nil {
		out.Reset()
		out.Write(b)
	}
	fmt.Fprintln(stdout, strings.TrimSpace(out.String()))
	return nil
}
