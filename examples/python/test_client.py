"""Tests the example client against a real agentd (python3 -m unittest -v test_client):

  AGENTD_ADDR=host:port   an agentd already running with the demo agent (--demo-delay 0 is
                          quickest), as examples/run-tests.sh starts it; or
  AGENTD_BIN=path         an agentd binary this test starts on a free loopback port and stops.

With neither it skips, unless CI is set: then it fails. AGENTD_TOKEN, when set, is sent as a
bearer token.
"""

import json
import os
import re
import signal
import subprocess
import tempfile
import time
import unittest

import client
from agentd.v1 import events_pb2 as events_pb
from agentd.v1 import transcript_pb2 as transcript_pb

NEEDS = "set AGENTD_ADDR (a running agentd) or AGENTD_BIN (an agentd binary to start); examples/run-tests.sh does"


def setUpModule():
    global ADDR, _agentd, _log
    ADDR, _agentd, _log = os.environ.get("AGENTD_ADDR"), None, None
    if ADDR:
        return
    binary = os.environ.get("AGENTD_BIN")
    if not binary:
        if os.environ.get("CI"):
            raise RuntimeError(NEEDS + "; CI is set, so this fails instead of skipping")
        raise unittest.SkipTest(NEEDS)
    # Start agentd on a port the kernel picks, and read the address from its log.
    _log = tempfile.TemporaryFile()
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTD_")}
    _agentd = subprocess.Popen([binary, "--listen", "127.0.0.1:0", "--demo-delay", "0"],
                               env=env, stdout=subprocess.DEVNULL, stderr=_log)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        m = re.search(rb'"msg":"agentd listening","addr":"([^"]+)"', _read_log())
        if m:
            ADDR = m.group(1).decode()
            return
        if _agentd.poll() is not None:
            break
        time.sleep(0.05)
    _agentd.kill()
    raise RuntimeError(f"agentd did not start:\n{_read_log().decode(errors='replace')}")


def tearDownModule():
    if _agentd is None or _agentd.poll() is not None:
        return
    _agentd.send_signal(signal.SIGTERM)
    code = _agentd.wait(timeout=60)
    if code != 0:
        raise RuntimeError(f"agentd exited {code} after SIGTERM:\n{_read_log().decode(errors='replace')}")


def _read_log():
    _log.seek(0)
    return _log.read()


class ConversationTest(unittest.TestCase):
    def test_approval_and_steer(self):
        lines = []
        conv = client.converse(ADDR, token=os.environ.get("AGENTD_TOKEN"), log=lines.append)
        msg = "\n--- client log:\n" + "\n".join(lines)

        # ListAgents: the demo agent, whose save_note needs an approval.
        demo = next((a for a in conv.agents if a.name == "demo"), None)
        self.assertIsNotNone(demo, msg)
        self.assertTrue(next(t for t in demo.tools if t.spec.name == "save_note").requires_approval)

        # A well-formed stream: run_started first, run_finished last, once each.
        self.assertEqual(conv.kinds[0], "run_started", msg)
        self.assertEqual(conv.kinds[-1], "run_finished", msg)
        self.assertEqual(conv.kinds.count("run_finished"), 1, msg)

        # The steer (client_seq 2) and the decision (3) were both accepted, in that order.
        self.assertEqual(conv.acks, [(2, True, None), (3, True, None)], msg)

        # save_note ran with the edited arguments (note ids count up per agentd process).
        self.assertEqual(json.loads(conv.approved_arguments), client.EDITED_ARGUMENTS, msg)
        name, output, is_error = conv.tool_results[0]
        self.assertRegex(output.get("id", ""), r"^note_\d+$", msg)
        self.assertEqual((name, output, is_error),
                         ("save_note", {"id": output["id"], "saved": True, "title": "Buy milk"}, False), msg)

        # The steer entered the transcript after save_note's result, and the model answered it.
        self.assertEqual(conv.steer_applied, (2, False), msg)
        resolved = conv.kinds.index("approval_resolved")
        self.assertLess(conv.kinds.index("tool_call_result", resolved), conv.kinds.index("steer_applied", resolved), msg)
        self.assertEqual(conv.tool_results[1], ("calculate", {"expression": "6*7", "result": 42}, False), msg)

        # The run completed; the final text is what streamed, and the transcript holds the
        # input, the call, its result, the steer, and the rest in that order.
        self.assertEqual(conv.finished.reason, events_pb.RUN_END_REASON_COMPLETED, msg)
        self.assertEqual(conv.final_text, "6*7 = 42", msg)
        self.assertEqual(conv.text, conv.final_text, msg)
        role = transcript_pb.Role.Name
        got = [role(m.role).removeprefix("ROLE_") + ":" +
               "+".join(p.text if p.WhichOneof("kind") == "text" else p.WhichOneof("kind") for p in m.parts)
               for m in conv.finished.new_messages]
        self.assertEqual(got, [
            f"USER:{client.INPUT}",
            "ASSISTANT:tool_call",
            "TOOL:tool_result",
            f"USER:{client.STEER}",
            "ASSISTANT:tool_call",
            "TOOL:tool_result",
            "ASSISTANT:6*7 = 42",
        ], msg)


if __name__ == "__main__":
    unittest.main()
