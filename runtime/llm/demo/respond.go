package demo

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/agentd/agentd/runtime"
	"github.com/agentd/agentd/runtime/tool/builtin"
)

// reply is what the model answers: text, or one tool call.
type reply struct {
	text string
	call *runtime.ToolCall
}

// respond decides the reply to req. It is a pure function of the request.
func respond(req *runtime.ModelRequest) reply {
	if n := len(req.Messages); n > 0 {
		switch last := req.Messages[n-1]; last.Role {
		case runtime.RoleTool:
			return reply{text: answerResults(last)}
		case runtime.RoleUser:
			return respondTo(req, last.Text())
		}
	}
	return reply{text: intro(req, "")}
}

// respondTo answers a user's message.
func respondTo(req *runtime.ModelRequest, text string) reply {
	call := func(name string, args any) reply {
		b, _ := marshal(args)
		return reply{call: &runtime.ToolCall{ID: callID(len(req.Messages)), Name: name, Arguments: b}}
	}
	if task := delegation(text); task != "" && hasTool(req, ResearcherTool) {
		return call(ResearcherTool, struct {
			Task string `json:"task"`
		}{task})
	}
	if isNoteRequest(text) {
		title, body := noteFrom(text)
		if body == "" {
			return reply{text: "What should the note say? Write it after a colon, as in \"save a note: buy milk\"."}
		}
		if !hasTool(req, builtin.SaveNoteName) {
			return reply{text: unavailable(builtin.SaveNoteName, "save notes")}
		}
		return call(builtin.SaveNoteName, struct {
			Title string `json:"title"`
			Text  string `json:"text"`
		}{title, body})
	}
	if expr := findExpression(text); expr != "" {
		if !hasTool(req, builtin.CalculateName) {
			return reply{text: unavailable(builtin.CalculateName, "work out "+expr)}
		}
		return call(builtin.CalculateName, struct {
			Expression string `json:"expression"`
		}{expr})
	}
	if isTimeQuestion(text) {
		if !hasTool(req, builtin.CurrentTimeName) {
			return reply{text: unavailable(builtin.CurrentTimeName, "tell the time")}
		}
		return call(builtin.CurrentTimeName, struct {
			Timezone string `json:"timezone"`
		}{findZone(text)})
	}
	if hasWord(text, "thanks", "thank", "thx", "cheers") {
		return reply{text: "You're welcome! Ask me the time anywhere, some arithmetic, or to save a note whenever you like."}
	}
	hint := ""
	if hasWord(text, "calculate", "compute", "calc", "sum") {
		hint = "I found no arithmetic expression in your message: write one with digits and operators, as in \"what is 12*7\".\n\n"
	}
	return reply{text: intro(req, hint)}
}

func unavailable(tool, what string) string {
	return fmt.Sprintf("The %s tool is not available in this run, so I cannot %s. "+
		"I am agentd's built-in demo model, not a language model: without my tools I can only explain myself.", tool, what)
}

// intro explains what the model is, what it can do with the tools req offers, and how to
// configure a real model.
func intro(req *runtime.ModelRequest, hint string) string {
	var b strings.Builder
	b.WriteString(hint)
	b.WriteString("Hello! I am agentd's built-in demo model, not a language model: I follow a few fixed rules, " +
		"so that you can try agentd without an API key.\n\n")
	can := []struct{ tool, line string }{
		{builtin.CurrentTimeName, "tell the time: ask \"what time is it?\", or \"what time is it in Tokyo?\" (a city, or a zone such as Europe/Berlin)"},
		{builtin.CalculateName, "do arithmetic: ask \"what is 12*7?\", \"calculate (3+4)/2\", \"add 2 and 3\" or \"15% of 80\""},
		{builtin.SaveNoteName, "save a note: say \"save a note: buy milk\" or \"remind me to call mum\" (agentd may ask you to approve it first)"},
		{ResearcherTool, "hand a task to another agent: say \"ask the researcher what time it is in Tokyo\", which runs as a child run of its own"},
	}
	var lines []string
	for _, c := range can {
		if hasTool(req, c.tool) {
			lines = append(lines, "- "+c.line+" (the "+c.tool+" tool);\n")
		}
	}
	if len(lines) == 0 {
		b.WriteString("No tools are available in this run, so all I can do is explain myself.\n\n")
	} else {
		b.WriteString("I can:\n")
		for _, l := range lines {
			b.WriteString(l)
		}
		b.WriteString("\n")
	}
	b.WriteString("For a real model, start agentd with --model openai:gpt-4.1-mini and OPENAI_API_KEY set, " +
		"or with --model anthropic:claude-sonnet-4-5 and ANTHROPIC_API_KEY set. " +
		"For an OpenAI-compatible server such as Ollama, set OPENAI_BASE_URL (for example http://localhost:11434/v1) " +
		"and pass --model openai:<model name>.")
	return b.String()
}

// answerResults answers from the results in a tool message, one sentence or so per
// result.
func answerResults(m runtime.Message) string {
	var out []string
	for _, p := range m.Parts {
		if p.Kind != runtime.PartToolResult {
			continue
		}
		out = append(out, answerResult(p.ToolResult))
	}
	if len(out) == 0 {
		return "The tools returned nothing."
	}
	return strings.Join(out, "\n")
}

func answerResult(r runtime.ToolResult) string {
	o := r.Output
	if o.IsError {
		s := fmt.Sprintf("The %s tool failed. Its error: “%s”.", r.Name, clip(o.String(), 500))
		if r.Name == builtin.SaveNoteName {
			s += " Nothing was saved."
		}
		return s
	}
	switch r.Name {
	case builtin.CurrentTimeName:
		var res builtin.TimeResult
		if json.Unmarshal(o.JSON, &res) == nil {
			if t, err := time.Parse(time.RFC3339, res.Time); err == nil {
				return fmt.Sprintf("It is %s on %s in %s (%s).", t.Format("15:04"), t.Format("Monday, 2 January 2006"), res.Timezone, res.Time)
			}
		}
	case builtin.CalculateName:
		var res builtin.CalculateResult
		if json.Unmarshal(o.JSON, &res) == nil && res.Expression != "" {
			return fmt.Sprintf("%s = %s", res.Expression, formatNumber(res.Result))
		}
	case builtin.SaveNoteName:
		var res builtin.SaveNoteResult
		if json.Unmarshal(o.JSON, &res) == nil && res.Saved {
			return fmt.Sprintf("Saved your note %q (%s).", res.Title, res.ID)
		}
	}
	if r.Name == ResearcherTool {
		return "The researcher says: " + clip(o.String(), 500)
	}
	return fmt.Sprintf("The %s tool returned: %s", r.Name, clip(o.String(), 500))
}

// ResearcherTool is the tool the demo model delegates to for "ask the researcher …",
// when the request offers it: an agent offered as a tool (a sub-agent).
const ResearcherTool = "researcher"

// delegationRE matches a request to hand a task over: "ask the researcher what time it
// is", "ask the researcher about 12*7", "ask the researcher: …".
var delegationRE = regexp.MustCompile(`(?i)\bask\s+(?:the\s+)?researcher\b[\s,:]*(?:(?:about|to)\s+)?(.*)`)

// delegation returns the task of a request to ask the researcher, or "".
func delegation(text string) string {
	m := delegationRE.FindStringSubmatch(text)
	if m == nil {
		return ""
	}
	return strings.TrimSpace(strings.TrimRight(m[1], "?.! "))
}

// formatNumber writes v without an exponent unless it is very large or very small.
func formatNumber(v float64) string {
	if a := max(v, -v); v != 0 && (a < 1e-6 || a >= 1e21) {
		return strconv.FormatFloat(v, 'g', -1, 64)
	}
	return strconv.FormatFloat(v, 'f', -1, 64)
}

// clip shortens s to at most n characters.
func clip(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n]) + "…"
}

// marshal encodes v as JSON, leaving HTML characters as they are.
func marshal(v any) (string, error) {
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return "", err
	}
	return strings.TrimSuffix(b.String(), "\n"), nil
}

// lowerWords returns the words of s, in lower case.
func lowerWords(s string) []string {
	return strings.FieldsFunc(strings.ToLower(s), func(r rune) bool {
		return !unicode.IsLetter(r) && !unicode.IsDigit(r) && r != '\''
	})
}

// hasWord reports whether s holds one of words as a whole word, in any case.
func hasWord(s string, words ...string) bool {
	for _, w := range lowerWords(s) {
		for _, want := range words {
			if w == want {
				return true
			}
		}
	}
	return false
}

func isTimeQuestion(s string) bool {
	if hasWord(s, "time", "clock", "date", "today", "timezone", "o'clock") {
		return true
	}
	l := strings.ToLower(s)
	return strings.Contains(l, "what day") || strings.Contains(l, "which day")
}

// zoneRE matches what looks like an IANA zone name, such as Europe/Berlin,
// America/Argentina/Salta or Etc/GMT+2; the tool says whether it is one.
var zoneRE = regexp.MustCompile(`\b[A-Z][A-Za-z]+/[A-Z][A-Za-z0-9_+\-]*(?:/[A-Z][A-Za-z0-9_+\-]*)?|\bUTC\b`)

// findZone returns the IANA zone named in s, or of a city or country it names, or "UTC".
func findZone(s string) string {
	if z := zoneRE.FindString(s); z != "" {
		return z
	}
	words := lowerWords(s)
	for i := range words {
		for n := 3; n >= 1; n-- { // "rio de janeiro" before "rio"
			if i+n <= len(words) {
				if z, ok := placeZones[strings.Join(words[i:i+n], " ")]; ok {
					return z
				}
			}
		}
	}
	return "UTC"
}

// placeZones are the zones of places people ask the time of by name.
var placeZones = map[string]string{
	"london": "Europe/London", "uk": "Europe/London", "britain": "Europe/London", "england": "Europe/London",
	"dublin": "Europe/Dublin", "ireland": "Europe/Dublin", "lisbon": "Europe/Lisbon", "portugal": "Europe/Lisbon",
	"paris": "Europe/Paris", "france": "Europe/Paris", "berlin": "Europe/Berlin", "germany": "Europe/Berlin",
	"munich": "Europe/Berlin", "amsterdam": "Europe/Amsterdam", "brussels": "Europe/Brussels", "madrid": "Europe/Madrid",
	"spain": "Europe/Madrid", "barcelona": "Europe/Madrid", "rome": "Europe/Rome", "italy": "Europe/Rome", "milan": "Europe/Rome",
	"zurich": "Europe/Zurich", "vienna": "Europe/Vienna", "stockholm": "Europe/Stockholm", "oslo": "Europe/Oslo",
	"copenhagen": "Europe/Copenhagen", "helsinki": "Europe/Helsinki", "warsaw": "Europe/Warsaw", "prague": "Europe/Prague",
	"athens": "Europe/Athens", "istanbul": "Europe/Istanbul", "turkey": "Europe/Istanbul", "kyiv": "Europe/Kyiv",
	"moscow": "Europe/Moscow", "cairo": "Africa/Cairo", "egypt": "Africa/Cairo", "lagos": "Africa/Lagos", "nigeria": "Africa/Lagos",
	"nairobi": "Africa/Nairobi", "kenya": "Africa/Nairobi", "johannesburg": "Africa/Johannesburg", "south africa": "Africa/Johannesburg",
	"dubai": "Asia/Dubai", "tehran": "Asia/Tehran", "karachi": "Asia/Karachi", "india": "Asia/Kolkata", "mumbai": "Asia/Kolkata",
	"delhi": "Asia/Kolkata", "new delhi": "Asia/Kolkata", "bangalore": "Asia/Kolkata", "bengaluru": "Asia/Kolkata",
	"dhaka": "Asia/Dhaka", "bangkok": "Asia/Bangkok", "thailand": "Asia/Bangkok", "jakarta": "Asia/Jakarta",
	"singapore": "Asia/Singapore", "kuala lumpur": "Asia/Kuala_Lumpur", "hong kong": "Asia/Hong_Kong", "china": "Asia/Shanghai",
	"beijing": "Asia/Shanghai", "shanghai": "Asia/Shanghai", "taipei": "Asia/Taipei", "manila": "Asia/Manila",
	"seoul": "Asia/Seoul", "korea": "Asia/Seoul", "tokyo": "Asia/Tokyo", "japan": "Asia/Tokyo", "osaka": "Asia/Tokyo",
	"perth": "Australia/Perth", "adelaide": "Australia/Adelaide", "brisbane": "Australia/Brisbane", "sydney": "Australia/Sydney",
	"melbourne": "Australia/Melbourne", "auckland": "Pacific/Auckland", "new zealand": "Pacific/Auckland", "honolulu": "Pacific/Honolulu",
	"hawaii": "Pacific/Honolulu", "anchorage": "America/Anchorage", "alaska": "America/Anchorage", "los angeles": "America/Los_Angeles",
	"san francisco": "America/Los_Angeles", "seattle": "America/Los_Angeles", "vancouver": "America/Vancouver",
	"denver": "America/Denver", "phoenix": "America/Phoenix", "chicago": "America/Chicago", "dallas": "America/Chicago",
	"houston": "America/Chicago", "mexico city": "America/Mexico_City", "mexico": "America/Mexico_City",
	"new york": "America/New_York", "boston": "America/New_York", "washington": "America/New_York", "miami": "America/New_York",
	"atlanta": "America/New_York", "toronto": "America/Toronto", "montreal": "America/Toronto", "bogota": "America/Bogota",
	"lima": "America/Lima", "santiago": "America/Santiago", "buenos aires": "America/Argentina/Buenos_Aires",
	"argentina": "America/Argentina/Buenos_Aires", "sao paulo": "America/Sao_Paulo", "são paulo": "America/Sao_Paulo",
	"rio de janeiro": "America/Sao_Paulo", "rio": "America/Sao_Paulo", "brazil": "America/Sao_Paulo",
}
