"""What `local_llm_cost.py` measured, and the report it prints.

A `Turn` is one question asked of one agent, with the model calls it caused as the
simulated llama.cpp server recorded them; a `TreeRun` holds every turn asked of
one tree's server. `print_report` prints, in this order:

- a legend: the two speed profiles, the slots, what each column means;
- for each tree, a table of its turns (steps, model calls, prompt tokens and the
  share of them cached, generated tokens and those in answers, GPU and CPU
  seconds, the floor's GPU seconds and the ratio to it, calls by stage), then a
  total for each agent and for the floor;
- with both trees, the before -> after ratios of each turn's calls, GPU and CPU
  seconds and answer tokens;
- for each tree, the goals (listed in `local_llm_cost.py`'s docstring), each on a
  line that starts PASS or FAIL (`n/a` for the answer tokens without a before
  run), with a line for each turn that misses;
- notes, when there are any: turns where the server's count of model calls differs
  from the record, replies cut at `max_tokens`, stages the script does not expect,
  empty answers, and labelled results the turn's runs never printed.
"""

from __future__ import annotations

import statistics
from collections import Counter
from dataclasses import dataclass, field

from benchmarks.local_llm_scenarios import KNOWN_STAGES, SCENARIOS, SESSION, Scenario
from benchmarks.simulated_llamacpp import CPU, GPU, Call

AGENTS = ("react", "plan_execute")
ONE_STEP_CALLS, TRIVIAL_CALLS, PLAN_CALLS = 4, 3, 8
FLOOR_RATIO, CACHED_SHARE, ANSWER_TOKENS_RATIO = 1.5, 0.60, 0.60


@dataclass
class Turn:
    """One question asked of one agent, and the model calls it caused."""

    scenario: Scenario
    agent: str
    answer: str = ""
    outputs: list[str] = field(default_factory=list)  # stdout of the runs that worked
    server_calls: int | None = None  # the server's own count
    error: str | None = None
    calls: list[Call] = field(default_factory=list)

    @property
    def stages(self) -> Counter[str]:
        return Counter(call.stage for call in self.calls)

    @property
    def prompt(self) -> int:
        return sum(call.prompt_tokens for call in self.calls)

    @property
    def cached(self) -> int:
        return sum(call.cached_tokens for call in self.calls)

    @property
    def generated(self) -> int:
        return sum(call.generated_tokens for call in self.calls)

    @property
    def answer_generated(self) -> int:
        return sum(call.generated_tokens for call in self.calls if call.answer)

    @property
    def rewritten(self) -> int:
        """Answers written, then written again by a later call."""
        return max(sum(call.answer for call in self.calls) - 1, 0)

    def seconds(self, gpu: bool = True) -> float:
        return (GPU if gpu else CPU).seconds(self.calls)


@dataclass
class TreeRun:
    name: str
    source: str
    turns: dict[tuple[str, str], Turn] = field(default_factory=dict)  # (agent, key)
    error: str | None = None


def print_report(runs: list[TreeRun], floor: dict[str, Turn], slots: int) -> None:
    print(
        f"\nSimulated time: GPU prompt {GPU.prompt_tps:g} tok/s, generation "
        f"{GPU.generate_tps:g} tok/s; CPU {CPU.prompt_tps:g} and {CPU.generate_tps:g} tok/s; "
        f"{slots} slot(s). Columns: st steps, cached share of prompt tokens, gen "
        f"generated tokens, ans of them in answers, floor the 2-call floor's GPU s, x fl GPU "
        f"time over it."
    )
    for run in runs:
        report_tree(run, floor)
    by_name = {run.name: run for run in runs}
    if "before" in by_name and "after" in by_name:
        report_comparison(by_name["before"], by_name["after"])
    for run in runs:
        goals(run, floor, by_name.get("before"))
    checks(runs)


def _stages(turn: Turn) -> str:
    return " ".join(f"{stage}:{n}" for stage, n in sorted(turn.stages.items()))


def _ratio(value: float, base: float) -> str:
    return f"{value / base:.2f}x" if base else "-"


def report_tree(run: TreeRun, floor: dict[str, Turn]) -> None:
    print(f"\n== {run.name} ({run.source})")
    if run.error:
        print(f"   not run: {run.error}")
        return
    header = (
        f"{'agent':<12} {'turn':<16} {'st':>2} {'calls':>5} {'prompt':>7} {'cached':>6} "
        f"{'gen':>5} {'ans':>5} {'GPU s':>7} {'CPU s':>8} {'floor':>6} {'x fl':>5}  stages"
    )
    print(header)
    print("-" * len(header))
    for agent in AGENTS:
        for scenario in SCENARIOS:
            turn = run.turns.get((agent, scenario.key))
            if turn is None:
                continue
            base = floor.get(scenario.key)
            base_s = base.seconds() if base else 0.0
            note = f"  ERROR {turn.error[:60]}" if turn.error else ""
            print(
                f"{agent:<12} {scenario.key:<16} {len(scenario.steps):>2} {len(turn.calls):>5} "
                f"{turn.prompt:>7} {turn.cached / max(turn.prompt, 1):>6.0%} {turn.generated:>5} "
                f"{turn.answer_generated:>5} {turn.seconds():>7.1f} {turn.seconds(False):>8.1f} "
                f"{base_s:>6.1f} {_ratio(turn.seconds(), base_s):>5}  {_stages(turn)}{note}"
            )
    print("-" * len(header))
    for agent in AGENTS:
        turns = [t for (a, _), t in run.turns.items() if a == agent]
        if turns:
            summarize(agent, turns)
    if floor:
        summarize("floor", list(floor.values()))


def summarize(name: str, turns: list[Turn]) -> None:
    calls = [len(t.calls) for t in turns]
    prompt = sum(t.prompt for t in turns)
    gpu = [t.seconds() for t in turns]
    cpu = [t.seconds(False) for t in turns]
    print(
        f"{name:<12} total: {sum(calls)} calls (median {statistics.median(calls):g}), "
        f"{prompt} prompt tokens ({sum(t.cached for t in turns) / max(prompt, 1):.0%} cached), "
        f"{sum(t.generated for t in turns)} generated ({sum(t.answer_generated for t in turns)} "
        f"in answers); GPU {sum(gpu):.1f} s (median {statistics.median(gpu):.1f}), "
        f"CPU {sum(cpu):.1f} s (median {statistics.median(cpu):.1f})"
    )


def report_comparison(before: TreeRun, after: TreeRun) -> None:
    print("\n== before -> after (after / before)")
    header = (
        f"{'agent':<12} {'turn':<16} {'calls':>7} {'GPU s':>13} {'ratio':>6} "
        f"{'CPU s':>15} {'ratio':>6} {'answer tokens':>13}"
    )
    print(header)
    print("-" * len(header))
    for agent in AGENTS:
        for scenario in SCENARIOS:
            b, a = before.turns.get((agent, scenario.key)), after.turns.get((agent, scenario.key))
            if b is None or a is None:
                continue
            print(
                f"{agent:<12} {scenario.key:<16} {len(b.calls):>3}->{len(a.calls):<3} "
                f"{b.seconds():>6.1f}->{a.seconds():<6.1f} {_ratio(a.seconds(), b.seconds()):>6} "
                f"{b.seconds(False):>7.1f}->{a.seconds(False):<7.1f} "
                f"{_ratio(a.seconds(False), b.seconds(False)):>6} "
                f"{b.answer_generated:>6}->{a.answer_generated:<6}"
            )


def _verdict(ok: bool) -> str:
    return "PASS" if ok else "FAIL"


def goals(run: TreeRun, floor: dict[str, Turn], before: TreeRun | None) -> None:
    print(f"\n== goals: {run.name}")
    if run.error:
        print("   not run")
        return
    misses = []
    for (agent, key), turn in run.turns.items():
        scenario = turn.scenario
        if len(scenario.steps) != 1:
            continue
        limit = TRIVIAL_CALLS if scenario.trivial else ONE_STEP_CALLS
        base = floor.get(key)
        if turn.error or len(turn.calls) > limit:
            misses.append(f"{agent}/{key}: {len(turn.calls)} calls > {limit}")
        if base is None or turn.seconds() > FLOOR_RATIO * base.seconds():
            ratio = _ratio(turn.seconds(), base.seconds()) if base else "no floor"
            misses.append(f"{agent}/{key}: {ratio} the floor's GPU time")
    print(
        f"{_verdict(not misses)}  one-step questions: <= {ONE_STEP_CALLS} calls "
        f"({TRIVIAL_CALLS} for trivial code), GPU time <= {FLOOR_RATIO}x the 2-call floor"
    )
    for miss in misses:
        print(f"      {miss}")
    misses = []
    for (agent, key), turn in run.turns.items():
        if agent != "plan_execute" or len(turn.scenario.steps) != 3:
            continue
        if turn.error or len(turn.calls) > PLAN_CALLS or turn.rewritten:
            misses.append(f"{key}: {len(turn.calls)} calls, {turn.rewritten} answers rewritten")
    print(f"{_verdict(not misses)}  three-step plans: <= {PLAN_CALLS} calls, no answer rewritten")
    for miss in misses:
        print(f"      {miss}")
    shares = []
    for agent in AGENTS:
        turns = [run.turns[(agent, key)] for key in SESSION if (agent, key) in run.turns]
        prompt = sum(t.prompt for t in turns)
        shares.append((agent, sum(t.cached for t in turns) / max(prompt, 1)))
    ok = all(share >= CACHED_SHARE for _, share in shares)
    listed = ", ".join(f"{agent} {share:.0%}" for agent, share in shares)
    print(
        f"{_verdict(ok)}  3-turn session: >= {CACHED_SHARE:.0%} of prompt tokens cached ({listed})"
    )
    if before is run:
        return  # the baseline of the last goal
    if before is None or before.error:
        print("n/a   answer tokens >= 40% below before's: needs the before run")
        return
    keys = set(run.turns) & set(before.turns)
    now = sum(run.turns[k].answer_generated for k in keys)
    then = sum(before.turns[k].answer_generated for k in keys)
    print(
        f"{_verdict(now <= ANSWER_TOKENS_RATIO * then)}  answer tokens >= "
        f"{1 - ANSWER_TOKENS_RATIO:.0%} below before's: {now} against {then} "
        f"({_ratio(now, then)})"
    )


def checks(runs: list[TreeRun]) -> None:
    """Where the simulated model's record and the server's own count disagree, and
    replies that were cut or asked for something the script does not know."""
    notes = []
    for run in runs:
        for (agent, key), turn in run.turns.items():
            where = f"{run.name}/{agent}/{key}"
            if turn.server_calls is not None and turn.server_calls != len(turn.calls):
                notes.append(f"{where}: the server counted {turn.server_calls} model calls")
            cut = [c.stage for c in turn.calls if c.truncated]
            if cut:
                notes.append(f"{where}: replies cut at max_tokens in {', '.join(cut)}")
            odd = [c.stage for c in turn.calls if c.stage not in KNOWN_STAGES]
            if odd:
                notes.append(f"{where}: stages the script does not expect: {', '.join(odd)}")
            if not turn.error and not turn.answer.strip():
                notes.append(f"{where}: an empty answer")
            printed = "".join(turn.outputs)
            unprinted = [label for label in turn.scenario.labels if label not in printed]
            if not turn.error and unprinted:
                notes.append(f"{where}: its runs printed no {', '.join(map(repr, unprinted))}")
    if notes:
        print("\n== notes")
        for note in notes:
            print(f"   {note}")
