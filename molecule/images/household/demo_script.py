"""The demo household's conversation (`.ci/demo`): what the human types and what the stand-in
answers, a few dozen turns in English and Chinese with big command outputs, thinking and an image.

The household's stand-in (standin.py) serves these replies beside the live drill's; demo_drill.py
types the prompts into the pane. Every prompt starts with `demo NN:` so that no prompt is part of
another (the stand-in matches the newest prompt found in the last user message).
"""

from __future__ import annotations

from dataclasses import dataclass

from support.standin_api import Reply, Text, Thinking, ToolUse

SERVER = "kael-thread-rebuild"
REQUEST_TOOL = f"mcp__{SERVER}__thread_rebuild_request"
#: The picture the model looks at (the Read tool returns it as an image block).
IMAGE_NAME = "garden.png"


@dataclass(frozen=True)
class Turn:
    prompt: str
    replies: list[Reply]

    @property
    def answer(self) -> str:
        """The last words of the turn (the drill waits for them)."""
        texts = [b.text for b in self.replies[-1].blocks if isinstance(b, Text)]
        return texts[-1]

    @property
    def speech(self) -> list[tuple[str, str]]:
        """The turn's speech in order: the prompt, then every text block of every reply."""
        said = [("assistant", b.text) for r in self.replies for b in r.blocks
                if isinstance(b, Text)]
        return [("user", self.prompt), *said]


def _chat(n: int, prompt: str, answer: str) -> Turn:
    return Turn(f"demo {n:02}: {prompt}", [Reply([Text(answer)])])


def _listing(n: int, prompt: str, before: str, lines: int, after: str) -> Turn:
    """A command that prints LINES numbers: Claude Code sends `seq 1 5000` (23,893 bytes) to the
    model whole; `seq 1 25000` and longer it keeps in a file beside the session and sends a 2 KB
    preview."""
    command = {"command": f"seq 1 {lines}", "description": "a long listing"}
    return Turn(f"demo {n:02}: {prompt}",
                [Reply([Text(before), ToolUse("Bash", command)]), Reply([Text(after)])])


def _thought(n: int, prompt: str, thinking: str, answer: str) -> Turn:
    return Turn(f"demo {n:02}: {prompt}", [Reply([Thinking(thinking), Text(answer)])])


def _image(n: int, prompt: str, path: str) -> Turn:
    return Turn(f"demo {n:02}: {prompt}", [
        Reply([Text("Let me look at the picture."), ToolUse("Read", {"file_path": path})]),
        Reply([Text("It is a plain green square: the lawn, seen from very close. 绿色。")]),
    ])


def conversation(home: str) -> list[Turn]:
    """The turns before the install, in order (HOME: the Claude user's home)."""
    image = f"{home}/companion/{IMAGE_NAME}"
    return [
        _chat(1, "good morning! can you help me plan the week?",
              "Good morning! Tell me what is on and I will keep track."),
        _chat(2, "周一要去看牙医，下午三点。",
              "好的，周一下午三点看牙医，我记下了。"),
        _listing(3, "the backup job printed a long report, show me how many lines it has",
                 "Running it to count.", 30000,
                 "The report has 30000 lines; the last one is 30000."),
        _chat(4, "is that normal for a nightly backup?",
              "Yes: one line per file, and the count matches last week."),
        _thought(5, "think carefully: should we water the garden today if it rained at 6?",
                 "private: rain at 6, soil probably wet, skip watering",
                 "No need today: the morning rain did it."),
        _chat(6, "周三晚上家长会，七点开始。",
              "周三晚上七点家长会，已记下。要提醒你吗？"),
        _chat(7, "yes, remind me on Wednesday afternoon",
              "I will remind you on Wednesday afternoon about the meeting at seven."),
        _image(8, "what does the photo in the companion folder show?", image),
        _chat(9, "could you make the grocery list: milk, eggs, 豆腐, rice",
              "Groceries: milk, eggs, 豆腐 (tofu), rice."),
        _listing(10, "the sensor log is huge again, count it please",
                 "Counting the sensor log.", 60000,
                 "The sensor log has 60000 lines, twice the backup report."),
        _thought(11, "think: which day is best for the car service, Tuesday or Thursday?",
                 "private: Tuesday has the dentist on Monday before, Thursday is free",
                 "Thursday: nothing else is planned that day."),
        _chat(12, "好，周四送车去保养。",
              "好的，周四送车保养。"),
        _chat(13, "what have I planned so far this week?",
              "Monday 3 pm dentist, Wednesday 7 pm parents' evening, Thursday car service."),
        _listing(14, "one more long listing from the camera export, how long is it?",
                 "Checking the camera export.", 5000,
                 "The camera export lists 5000 lines."),
        _chat(15, "奶奶周六来吃午饭，她不吃辣。",
              "记住了：周六奶奶来吃午饭，菜不放辣。"),
        _chat(16, "suggest a mild lunch for her",
              "A mild lunch: steamed fish with ginger, tomato and egg, plain rice."),
        _thought(17, "think it through: do we have enough rice for Saturday?",
                 "private: rice was on the grocery list, so yes after shopping",
                 "Yes, once the groceries are in: rice is on the list."),
        _chat(18, "add ginger and tomatoes to the list",
              "Added: ginger and tomatoes."),
        _chat(19, "把购物清单用中文再说一遍。",
              "购物清单：牛奶、鸡蛋、豆腐、米、姜、西红柿。"),
        _listing(20, "the router log, count its lines too",
                 "Counting the router log.", 4500,
                 "The router log has 4500 lines."),
        _chat(21, "anything unusual in those numbers?",
              "No: every log grew as it usually does."),
        _chat(22, "the kids want pancakes on Sunday",
              "Pancakes on Sunday: flour, milk, eggs; only flour is missing."),
        _chat(23, "add flour then",
              "Flour added to the list."),
        _thought(24, "think: when should I go shopping so everything is fresh for Saturday?",
                 "private: Friday evening keeps fish fresh for Saturday lunch",
                 "Friday evening: the fish stays fresh for Saturday."),
        _chat(25, "周五晚上去超市，记下来。",
              "已记下：周五晚上去超市。"),
        _chat(26, "thank you, that is the week sorted",
              "You are welcome. The week is planned; I will remind you as we go."),
    ]


#: Typed after the install, in the session started again with --continue: the rebuild request.
P_REBUILD = "demo 90: yes, please rebuild the session now, the runtime clutter can go"
A_REBUILD = "Requesting the rebuild, as you agreed."
A_REBUILD_DONE = "The rebuild is recorded; it happens once this reply ends."
#: Typed into the new session: its request is what the new session's model was shown.
P_AFTER = "demo 91: what do you remember about this week? 你还记得吗？"
A_AFTER = "Everything we said: dentist, parents' evening, car service, grandma's lunch. 都记得。"

REBUILD = Turn(P_REBUILD, [
    Reply([Text(A_REBUILD), ToolUse(REQUEST_TOOL, {
        "reason": "demo: the human asked for a fresh start", "confirmation": "REBUILD"})]),
    Reply([Text(A_REBUILD_DONE)]),
])
AFTER = Turn(P_AFTER, [Reply([Text(A_AFTER)])])


def script() -> dict[str, list[Reply]]:
    """Every demo prompt and its replies, for the stand-in (the image path is the user's)."""
    turns = [*conversation("/home/alice"), REBUILD, AFTER]
    return {turn.prompt: turn.replies for turn in turns}
