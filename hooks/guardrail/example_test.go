package guardrail_test

import (
	"context"
	"errors"
	"fmt"
	"log"

	"github.com/agentd/agentd/hooks/guardrail"
	"github.com/agentd/agentd/runtime"
	"github.com/agentd/agentd/runtime/runtimetest"
)

func Example() {
	deny, err := guardrail.DenyList(runtime.GuardSpec{}, []string{`\b\d{3}-\d{2}-\d{4}\b`}, []string{"password"})
	if err != nil {
		log.Fatal(err)
	}
	size, err := guardrail.MaxSize(runtime.GuardSpec{}, 4096)
	if err != nil {
		log.Fatal(err)
	}
	agent, err := runtime.New(runtime.Config{
		Model: &runtimetest.Model{Steps: []runtimetest.Step{runtimetest.Say("Noted.")}},
		// Checked in this order; the first trip wins.
		Hooks: runtime.Chain(nil, deny, size),
	})
	if err != nil {
		log.Fatal(err)
	}
	req := &runtime.Request{Messages: []runtime.Message{runtime.UserMessage("My Password is hunter2")}}
	for ev, err := range agent.Run(context.Background(), req) {
		if err != nil {
			log.Fatal(err)
		}
		if fin, ok := ev.(*runtime.RunFinished); ok {
			fmt.Println(fin.Reason)
			if ge, ok := errors.AsType[*runtime.GuardrailError](fin.Err); ok {
				fmt.Println(ge.Guardrail, ge.Stage, ge.Reason)
			}
		}
	}
	// Output:
	// stopped
	// deny_list input matched the rule "password"
}
