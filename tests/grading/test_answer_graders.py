"""The answer graders of the benchmarks an operator declares as files (MBPP, LiveCodeBench, GSM8K,
MATH-500, MMLU-Pro, ARC-Challenge, HellaSwag, GPQA Diamond): rows shaped as the public datasets'
rows are written to a JSON Lines file, declared in an operator's sources file, read into items by
the pool's own field mapping and prompt formatting, stored and read back as the pool's item rows,
and graded through the runner's `grade` on chat replies, right, wrong, malformed and missing.
The code graders run the real sandbox (as root: its own user and namespaces)."""

from __future__ import annotations

import json
import os
import pwd

import pytest
import yaml

from speculator_arena.grading import boxed, choice, final_number, humaneval, livecodebench, mbpp
from speculator_arena.grading.code_reply import code_from_reply, program_from_reply
from speculator_arena.grading.dispatch import grade
from speculator_arena.grading.sandbox import CODE_USER
from speculator_arena.pools.lowb import sources
from speculator_arena.pools.lowb.model import Item

ROOT = os.geteuid() == 0
needs_root = pytest.mark.skipif(not ROOT, reason="the sandbox's own user and namespaces need root")

# --- rows shaped as the public datasets' rows -------------------------------------------------

GSM8K = [
    {
        "question": "Janet\u2019s ducks lay 16 eggs per day. She eats three for breakfast every morning and bakes "
        "muffins for her friends every day with four. She sells the remainder at the farmers' market daily for "
        "$2 per fresh duck egg. How much in dollars does she make every day at the farmers' market?",
        "answer": "Janet sells 16 - 3 - 4 = <<16-3-4=9>>9 duck eggs a day.\nShe makes 9 * 2 = $<<9*2=18>>18 every "
        "day at the farmer\u2019s market.\n#### 18",
    },
    {
        "question": "Josh decides to try flipping a house.  He buys a house for $80,000 and then puts in $50,000 in "
        "repairs.  This increased the value of the house by 150%.  How much profit did he make?",
        "answer": "The cost of the house and repairs came out to 80,000+50,000=$<<80000+50000=130000>>130,000\nHe "
        "increased the value of the house by 80,000*1.5=<<80000*1.5=120000>>120,000\nSo the new value of the "
        "house is 120,000+80,000=$<<120000+80000=200000>>200,000\nSo he made a profit of "
        "200,000-130,000=$<<200000-130000=70000>>70,000\n#### 70000",
    },
]

MATH500 = [
    {
        "problem": "If $f(x) = \\frac{3x-2}{x-2}$, what is the value of $f(-2) +f(-1)+f(0)$? Express your answer "
        "as a common fraction.",
        "solution": "$f(-2)+f(-1)+f(0)=\\frac{3(-2)-2}{-2-2}+\\frac{3(-1)-2}{-1-2}+\\frac{3(0)-2}{0-2}="
        "2+\\frac{5}{3}+1=\\boxed{\\frac{14}{3}}$",
        "answer": "\\frac{14}{3}",
        "subject": "Algebra",
        "level": 3,
        "unique_id": "test/algebra/2584.json",
    },
    {
        "problem": "Convert the point $(0,3)$ in rectangular coordinates to polar coordinates.  Enter your answer "
        "in the form $(r,\\theta),$ where $r > 0$ and $0 \\le \\theta < 2 \\pi.$",
        "solution": "We have that $r = \\sqrt{0^2 + 3^2} = 3.$ ... $\\boxed{\\left( 3, \\frac{\\pi}{2} \\right)}.$",
        "answer": "\\left( 3, \\frac{\\pi}{2} \\right)",
        "subject": "Precalculus",
        "level": 2,
        "unique_id": "test/precalculus/807.json",
    },
    {
        "problem": "The results of a cross-country team's training run are graphed below. Which student has the "
        "greatest average speed?",
        "solution": "Evelyn covered more distance in less time than Briana, Debra and Angela, so her average "
        "speed is greater than any of their average speeds. ... $\\boxed{\\text{Evelyn}}$",
        "answer": "\\text{Evelyn}",
        "subject": "Algebra",
        "level": 2,
        "unique_id": "test/algebra/1349.json",
    },
]

MMLU_PRO = [
    {
        "question_id": 7012,
        "question": "A ball is thrown straight up at 20 m/s. Taking g = 10 m/s^2, what is its maximum height?",
        "options": ["2 m", "5 m", "10 m", "15 m", "25 m", "30 m", "35 m", "40 m", "20 m", "45 m"],
        "answer": "I",
        "answer_index": 8,
        "cot_content": "",
        "category": "physics",
        "src": "stemez-Physics",
    }
]

ARC = [
    {
        "id": "Mercury_7175875",
        "question": "An astronomer observes that a planet rotates faster after a meteorite impact. Which is the most "
        "likely effect of this increase in rotation?",
        "choices": {
            "text": [
                "Planetary density will decrease.",
                "Planetary years will become longer.",
                "Planetary days will become shorter.",
                "Planetary gravity will become stronger.",
            ],
            "label": ["A", "B", "C", "D"],
        },
        "answerKey": "C",
    },
    {
        "id": "Mercury_SC_409171",
        "question": "A group of engineers wanted to know how different building designs would respond during an "
        "earthquake. They made several models of buildings and tested each for its ability to withstand "
        "earthquake conditions. Which will most likely result from testing different building designs?",
        "choices": {
            "text": [
                "buildings will be built faster",
                "buildings will be made safer",
                "building designs will look nicer",
                "building materials will be cheaper",
            ],
            "label": ["A", "B", "C", "D"],
        },
        "answerKey": "B",
    },
]

ARC_NUMBERED = [  # a few ARC rows label their options "1".."4"
    {
        "id": "NYSEDREGENTS_2015_4_8",
        "question": "Which object is the best conductor of electricity?",
        "choices": {
            "text": ["wax crayon", "plastic spoon", "rubber eraser", "iron nail"],
            "label": ["1", "2", "3", "4"],
        },
        "answerKey": "4",
    }
]

HELLASWAG = [
    {
        "ind": 24,
        "activity_label": "Roof shingle removal",
        "ctx_a": "A man is sitting on a roof.",
        "ctx_b": "he",
        "ctx": "A man is sitting on a roof. he",
        "endings": [
            "is using wrap to wrap a pair of skis.",
            "is ripping level tiles off.",
            "is holding a rubik's cube.",
            "starts pulling up roofing on a roof.",
        ],
        "source_id": "activitynet~v_-JhWjGDPHMY",
        "split": "val",
        "split_type": "indomain",
        "label": "3",
    },
    {
        "ind": 92,
        "activity_label": "Clean and jerk",
        "ctx_a": "A lady walks to a barbell. She bends down and grabs the pole.",
        "ctx_b": "the lady",
        "ctx": "A lady walks to a barbell. She bends down and grabs the pole. the lady",
        "endings": [
            "swings and lands in her arms.",
            "pulls the barbell forward.",
            "stands and lifts the weight over her head.",
            "pulls a rope attached to the barbell.",
        ],
        "source_id": "activitynet~v_-lJS58hyo1c",
        "split": "val",
        "split_type": "zeroshot",
        "label": "2",
    },
]

GPQA = [  # the hub's CSV holds "Correct Answer" and "Incorrect Answer 1..3": an operator's file
    # carries them shuffled into `choices`, with the correct one's letter
    {
        "Record ID": "recB8mY1xGQ1gcGKc",
        "Question": "Which of the following is the spin multiplicity of the ground state of the oxygen molecule?",
        "choices": ["1", "3", "2", "5"],
        "answer": "B",
    }
]

MBPP = [
    {
        "source_file": "Benchmark Questions Verification V2.ipynb",
        "task_id": 2,
        "prompt": "Write a function to find the shared elements from the given two lists.",
        "code": "def similar_elements(test_tup1, test_tup2):\n  res = tuple(set(test_tup1) & set(test_tup2))\n"
        "  return (res) ",
        "test_imports": [],
        "test_list": [
            "assert set(similar_elements((3, 4, 5, 6),(5, 7, 4, 10))) == set((4, 5))",
            "assert set(similar_elements((1, 2, 3, 4),(5, 4, 3, 7))) == set((3, 4))",
            "assert set(similar_elements((11, 12, 14, 13),(17, 15, 14, 13))) == set((13, 14))",
        ],
    },
    {
        "source_file": "Benchmark Questions Verification V2.ipynb",
        "task_id": 276,
        "prompt": "Write a function that takes in the radius and height of a cylinder and returns the the volume.",
        "code": "def volume_cylinder(r,h):\n  volume=3.1415*r*r*h\n  return volume",
        "test_imports": ["import math"],
        "test_list": [
            "assert math.isclose(volume_cylinder(10,5), 1570.7500000000002, rel_tol=0.001)",
            "assert math.isclose(volume_cylinder(4,5), 251.32000000000002, rel_tol=0.001)",
            "assert math.isclose(volume_cylinder(4,10), 502.64000000000004, rel_tol=0.001)",
        ],
    },
]

LCB_QUESTION = (
    "You are given positive integers A and B.\nOutput the square of A + B.\n\nInput\n\nThe input is given from "
    "Standard Input in the following format:\nA B\n\nOutput\n\nPrint the answer.\n\nConstraints\n\n\n- "
    "1 \\leq A,B \\leq 2025\n- All input values are integers.\n\nSample Input 1\n\n20 15\n\nSample Output 1\n\n"
    "1225\n\n$(20+15)^2=1225$, so print 1225."
)
LCB_CASES = [
    {"input": "20 15\n", "output": "1225\n", "testtype": "stdin"},
    {"input": "1 1\n", "output": "4\n", "testtype": "stdin"},
    {"input": "2025 2025\n", "output": "16402500\n", "testtype": "stdin"},
]
LCB = [
    {
        "question_title": "Happy New Year 2025",
        "question_content": LCB_QUESTION,
        "platform": "atcoder",
        "question_id": "abc387_a",
        "contest_id": "abc387",
        "contest_date": "2025-01-04T00:00:00",
        "starter_code": "",
        "difficulty": "easy",
        "public_test_cases": json.dumps(LCB_CASES),
        "private_test_cases": "eJxrYJmqzsIABhE1QIY2UjRoT0jNqSQ0lxGfQ==",
        "metadata": "{}",
    },
    {
        "question_title": "minimum-element-after-replacement-with-digit-sum",
        "question_content": "You are given an integer array nums.\nYou replace each element in nums with the sum of "
        "its digits.\nReturn the minimum element in nums after all replacements.",
        "platform": "leetcode",
        "question_id": "3606",
        "contest_id": "biweekly-contest-140",
        "contest_date": "2024-09-28T07:30:00",
        "starter_code": "class Solution:\n    def minElement(self, nums: List[int]) -> int:\n        ",
        "difficulty": "easy",
        "public_test_cases": json.dumps([{"input": "[10, 12, 13, 14]", "output": "1", "testtype": "functional"}]),
        "private_test_cases": "eJxrYJmqz8IABhE1QIY2UjRoT0jNqSQ0lxGfQ==",
        "metadata": '{"func_name": "minElement"}',
    },
]


# --- items made as the pool makes them ---------------------------------------------------------


def _items(tmp_path, benchmark: str, rows: list[dict], **override) -> list[Item]:
    """The items of `rows` declared as an operator's file for `benchmark` (`override`: the
    operator's own `fields`/`grader`), each stored and read back as the pool's item row."""
    data = tmp_path / f"{benchmark}.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    declared = tmp_path / f"{benchmark}-sources.yaml"
    entry = {"benchmark": benchmark, "path": data.name, **override}
    declared.write_text(yaml.safe_dump({"extends": "default", "sources": [entry]}), encoding="utf-8")
    [source] = [e for e in sources.load_sources(declared) if e["benchmark"] == benchmark]
    assert source["kind"] == "file" and sources.available(source)
    items = []
    for n, c in enumerate(sources.read_candidates(source)):
        row = Item(f"{benchmark}-{n}", "accuracy", c.benchmark, c.messages, 1024, c.grader).to_row()
        items.append(Item.from_row(json.loads(json.dumps(row))))
    return items


def _verdict(item: Item, reply: str | None) -> str:
    return grade(item, reply).verdict


# --- GSM8K: final-number ------------------------------------------------------------------------


def test_gsm8k_reads_the_number_after_the_last_hashes_else_the_last_number(tmp_path):
    janet, josh = _items(tmp_path, "gsm8k", GSM8K)
    assert janet.grader == {"kind": "final-number", "answer": GSM8K[0]["answer"]}
    assert janet.messages[0]["content"].endswith("End your answer with '#### <number>'.")
    assert _verdict(janet, "She sells 16 - 3 - 4 = 9 eggs, and 9 * 2 = 18.\n#### 18") == "pass"
    assert _verdict(janet, "9 eggs at $2 each.\n\n#### $18.00") == "pass"
    assert _verdict(janet, "#### 18\n\n(9 eggs sold, at $2 each.)") == "pass"  # the #### line wins
    assert _verdict(janet, "She makes **$18** every day.") == "pass"  # no ####: the last number
    assert _verdict(janet, "#### Step 1\n16 - 3 - 4 = 9 eggs.\n#### Step 2\n9 * 2 = 18") == "pass"  # headings
    assert _verdict(josh, "The profit is $200,000 - $130,000 = $70,000.\n#### 70,000") == "pass"
    assert _verdict(josh, "#### 70000.") == "pass"
    wrong = grade(janet, "16 - 3 = 13 eggs, 13 * 2 = 26.\n#### 26")
    assert (wrong.verdict, wrong.score) == ("fail", 0.0) and "26" not in wrong.detail and "18" not in wrong.detail
    assert grade(janet, "I am not sure how to solve this.").detail == "no number found in the answer"
    assert grade(janet, None).verdict == grade(janet, "").verdict == "fail"


def test_final_number_compares_numbers_not_strings():
    assert final_number.to_number("1,000") == final_number.to_number("1000")
    assert final_number.to_number("$3.50.") == final_number.to_number("3.5")
    assert final_number.reference_number("work\n#### 1,234") == 1234
    assert final_number.grade_final_number("#### 3.50", "x\n#### 3.5").verdict == "pass"
    assert final_number.grade_final_number("#### -4", "#### -4").verdict == "pass"
    assert final_number.grade_final_number("10 - 5", "#### 5").verdict == "pass"  # not -5
    assert final_number.grade_final_number("#### 18", "no number here").verdict == "error"


# --- MATH-500: boxed ------------------------------------------------------------------------------


def test_math500_reads_the_last_box_and_normalises_lightly(tmp_path):
    frac, polar, evelyn = _items(tmp_path, "math-500", MATH500)
    assert frac.grader == {"kind": "boxed", "answer": "\\frac{14}{3}"}
    assert frac.messages[0]["content"].endswith("Put the final answer in \\boxed{}.")
    assert _verdict(frac, "So $f(-2)+f(-1)+f(0) = 2 + \\frac53 + 1 = \\boxed{\\dfrac{14}{3}}$.") == "pass"
    assert _verdict(frac, "The sum is $\\boxed{14/3}$") == "pass"
    assert _verdict(frac, "First try: \\boxed{5}. Correcting the middle term: \\boxed{\\frac{14}{3}}") == "pass"
    assert _verdict(frac, "\\boxed{4.67}") == "fail"
    assert grade(frac, "The answer is 14/3.").detail == "no \\boxed{} answer found"
    assert _verdict(frac, "so the answer is \\boxed{\\frac{14}{3}") == "fail"  # cut off: never closed
    assert (
        _verdict(polar, "$r = 3$ and $\\theta = \\frac{\\pi}{2}$: $\\boxed{\\left(3, \\frac{\\pi}{2}\\right)}$")
        == "pass"
    )
    assert _verdict(polar, "\\boxed{(3,\\frac{\\pi}{2})}") == "pass"
    assert _verdict(polar, "\\boxed{(3, 90^\\circ)}") == "fail"  # equal only in meaning: a documented miss
    assert _verdict(evelyn, "Evelyn is fastest: $\\boxed{\\text{Evelyn}}$") == "pass"
    assert _verdict(evelyn, "\\boxed{Evelyn}") == "pass"
    assert _verdict(evelyn, "\\boxed{\\text{Angela}}") == "fail"
    assert grade(frac, None).verdict == grade(frac, "  ").verdict == "fail"


def test_boxed_normalisation_and_its_limits():
    assert boxed.last_boxed("a \\boxed{\\frac{1}{2}} b \\boxed{x^{2}+1} c") == "x^{2}+1"
    assert boxed.last_boxed("\\boxed 5$") == "5"
    assert boxed.normalize("10\\text{ cm}") == "10"
    assert boxed.normalize("x = 5") == "5"
    assert boxed.normalize("30^\\circ") == boxed.normalize("30^{\\circ}") == "30"
    assert boxed.normalize("\\text{(C)}") == boxed.normalize("C") == "C"
    assert boxed.equivalent("0.5", "\\frac12") and boxed.equivalent("-\\frac{3}{4}", "-0.75")
    assert boxed.equivalent("\\sqrt2", "\\sqrt{2}") and boxed.equivalent("10{,}000", "10000")
    assert boxed.equivalent("50\\%", "50") and boxed.equivalent("\\$18.", "18")
    assert not boxed.equivalent("2\\sqrt{2}", "\\sqrt{8}")  # string, not symbolic, equivalence
    assert boxed.grade_boxed("\\boxed{3}", "").verdict == "error"
    assert boxed.grade_boxed("\\boxed{3}", "so it is $\\boxed{3}$").verdict == "pass"  # a solution as answer


# --- multiple choice: MMLU-Pro, ARC-Challenge, HellaSwag, GPQA Diamond ---------------------------


def test_mmlu_pro_ten_options_answer_index(tmp_path):
    [item] = _items(tmp_path, "mmlu-pro", MMLU_PRO)
    assert item.grader == {"kind": "choice", "answer": 8}
    prompt = item.messages[0]["content"]
    assert "\nI. 20 m\nJ. 45 m\n" in prompt and prompt.startswith(MMLU_PRO[0]["question"])
    for reply in (
        "h = v^2 / (2g) = 400 / 20 = 20 m. The answer is (I).",
        "Answer: I",
        "**Answer: I**",
        "I think the answer is I.",
        "Answer: I think it is (I), 20 m.",  # "I think" is not option I
        "The answer is (B). Wait: v^2/(2g) = 20 m, so the answer is (I).",  # the last explicit one
        "I",
        "$\\boxed{I}$",
    ):
        assert _verdict(item, reply) == "pass", reply
    assert _verdict(item, "The answer is (C).") == "fail"
    both = grade(item, "The answer is (I) or (J).")
    assert (both.verdict, both.detail) == ("fail", "more than one choice named, no single answer")
    assert grade(item, "I cannot tell without more data.").detail == "no choice letter found in the answer"
    assert grade(item, None).verdict == grade(item, "").verdict == "fail"


def test_arc_answer_key_letter(tmp_path):
    planet, quake = _items(tmp_path, "arc-challenge", ARC)
    assert quake.grader == {"kind": "choice", "answer": "B", "labels": ["A", "B", "C", "D"]}
    assert "\nB. buildings will be made safer\n" in quake.messages[0]["content"]
    for reply in (
        "B",
        "B.",
        "**B**",
        "(B)",
        "B. buildings will be made safer",
        "The correct answer is B.",
        "B\n\nTesting designs shows which ones survive shaking.",
        "Testing shows which designs survive; option B follows.",
    ):
        assert _verdict(quake, reply) == "pass", reply
    assert _verdict(quake, "C") == "fail"
    assert _verdict(quake, "The answer is B and I am confident of it.") == "pass"  # "and I am" names no second
    assert grade(quake, "The answer is A/B.").detail == "more than one choice named, no single answer"
    two = grade(quake, "A) is too slow to test.\nB) is what testing gives.")  # two marked letters, no statement
    assert (two.verdict, two.detail) == ("fail", "more than one choice named, no single answer")
    assert _verdict(planet, "Faster rotation means shorter days: the answer is C.") == "pass"
    assert _verdict(planet, "the answer is c") == "fail"  # a lower-case letter is a word, not a choice


def test_arc_numbered_labels_read_through_the_labels(tmp_path):
    """ARC's `choices.label` is mapped, so a key "4" is the fourth option (D), not index 4."""
    [nail] = _items(tmp_path, "arc-challenge", ARC_NUMBERED)
    assert nail.grader == {"kind": "choice", "answer": "4", "labels": ["1", "2", "3", "4"]}
    assert "\nD. iron nail" in nail.messages[0]["content"]
    assert _verdict(nail, "Metals conduct: the answer is D.") == "pass"
    assert _verdict(nail, "A") == "fail"


def test_hellaswag_label_is_a_digit_index(tmp_path):
    roof, lift = _items(tmp_path, "hellaswag", HELLASWAG)
    assert roof.grader == {"kind": "choice", "answer": "3"} and lift.grader["answer"] == "2"
    assert "\nD. starts pulling up roofing on a roof." in roof.messages[0]["content"]
    assert _verdict(roof, "D") == "pass" and _verdict(roof, "C") == "fail"
    assert _verdict(lift, "The most plausible ending is C: she stands and lifts it.\n\nAnswer: C") == "pass"
    assert _verdict(lift, "Answer: D") == "fail"


def test_gpqa_operator_file(tmp_path):
    [item] = _items(tmp_path, "gpqa-diamond", GPQA)
    assert item.grader == {"kind": "choice", "answer": "B"}
    assert _verdict(item, "Two unpaired electrons in the \u03c0* orbitals: a triplet.\n\nAnswer: B") == "pass"
    assert _verdict(item, "Answer: A") == "fail"


def test_choice_answer_normalisation():
    assert choice.answer_letter(8) == "I" and choice.answer_letter("2") == "C" and choice.answer_letter("b") == "B"
    assert choice.answer_letter("4", labels=["1", "2", "3", "4"]) == "D"
    assert choice.answer_letter("iron nail", choices=["wax", "iron nail"]) == "B"
    assert choice.answer_letter(True) is None and choice.answer_letter("iron nail") is None
    assert choice.grade_choice("A", "iron nail").verdict == "error"


# --- MBPP ------------------------------------------------------------------------------------------

SIMILAR = (
    "Here is a function that returns the shared elements:\n\n```python\ndef similar_elements(test_tup1, "
    "test_tup2):\n    return tuple(set(test_tup1) & set(test_tup2))\n```\n\nIt uses set intersection."
)


def test_mbpp_runs_the_answers_code_then_the_asserts_in_the_sandbox(tmp_path):
    shared, cylinder = _items(tmp_path, "mbpp", MBPP)
    assert shared.grader == {"kind": "mbpp", "tests": MBPP[0]["test_list"], "test_imports": MBPP[0]["test_imports"]}
    assert MBPP[0]["test_list"][0] in shared.messages[0]["content"]  # MBPP's prompt shows the tests
    assert mbpp.function_under_test(MBPP[0]["test_list"]) == "similar_elements"
    assert (grade(shared, SIMILAR).verdict, grade(shared, SIMILAR).score) == ("pass", 1.0)
    usage_first = "```python\nprint(similar_elements((1, 2), (2, 3)))\n```\n\n" + SIMILAR
    assert _verdict(shared, usage_first) == "pass"  # the block that defines the function
    wrong = grade(shared, "```python\ndef similar_elements(a, b):\n    return tuple(a)\n```")
    assert (wrong.verdict, wrong.detail) == ("fail", "AssertionError")
    renamed = grade(shared, "```python\ndef common(a, b):\n    return tuple(set(a) & set(b))\n```")
    assert (renamed.verdict, renamed.detail) == ("fail", "NameError")
    assert grade(shared, "Use set intersection.").verdict == "fail"
    assert grade(shared, None).detail == "no answer"
    right = "```python\ndef volume_cylinder(r, h):\n    return 3.1415 * r * r * h\n```"
    assert _verdict(cylinder, right) == "pass"  # its asserts need `math`, from the row's `test_imports`
    assert _verdict(cylinder, right.replace("3.1415", "3")) == "fail"


def test_the_shared_code_reader():
    """The block defining the function, else the first block, else the whole reply; a reply cut
    off inside its block still gives the block (HumanEval and MBPP read replies through it)."""
    two = "```py\nx = 1\n```\n```python\ndef f():\n    pass\n```"
    assert code_from_reply(two, "f") == "def f():\n    pass\n" == humaneval.completion_from_reply(two, "f")
    assert code_from_reply(two, "g") == "x = 1\n"
    assert code_from_reply("no code", "f") == "no code"
    assert code_from_reply("```python\ndef f(", "f") == "def f("
    assert program_from_reply("```python\nprint(1)\n```\nSample:\n```\n1\n```") == "print(1)\n"


# --- LiveCodeBench ---------------------------------------------------------------------------------

RIGHT = "Read A and B, print (A+B)^2.\n\n```python\nA, B = map(int, input().split())\nprint((A + B) ** 2)\n```"


def test_livecodebench_runs_each_stdin_case_in_the_sandbox(tmp_path):
    square, leetcode = _items(tmp_path, "livecodebench-v6", LCB)
    assert square.grader == {"kind": "livecodebench", "tests": LCB[0]["public_test_cases"]}
    assert square.messages[0]["content"].startswith("You are given positive integers A and B.")
    ok = grade(square, RIGHT)
    assert (ok.verdict, ok.score, ok.detail) == ("pass", 1.0, "3/3 public cases passed")
    spaced = (
        "```python\nimport sys\n\ndef main():\n    a, b = map(int, sys.stdin.read().split())\n"
        "    sys.stdout.write(str((a + b) ** 2) + '   \\n\\n')\n\nif __name__ == '__main__':\n    main()\n```"
    )
    assert _verdict(square, spaced) == "pass"  # trailing spaces and blank lines
    assert _verdict(square, "```python\na, b = map(int, input().split())\nprint((a + b) ** 2)\nexit()\n```") == "pass"
    assert _verdict(square, RIGHT + "\n\nSample run:\n```\n1225\n```") == "pass"  # the program, not the output
    wrong = grade(square, "```python\na, b = map(int, input().split())\nprint(a * a + b * b)\n```")
    assert (wrong.verdict, wrong.detail) == ("fail", "case 1 of 3: wrong answer") and "1225" not in wrong.detail
    small = grade(square, "```python\na, b = map(int, input().split())\nprint((a + b) ** 2 if a < 100 else 0)\n```")
    assert small.detail == "case 3 of 3: wrong answer"
    crash = grade(square, "```python\nprint(int(input()) ** 2)\n```")
    assert (crash.verdict, crash.detail) == ("fail", "case 1 of 3: runtime error")
    quits = grade(square, "```python\nimport os\nos._exit(0)\n```")  # an early exit 0 is no pass
    assert quits.detail == "case 1 of 3: wrong answer"
    assert grade(square, "I would add them and square the sum.").detail == "case 1 of 3: runtime error"
    assert grade(square, None).detail == grade(square, "").detail == "no answer"
    functional = grade(leetcode, "```python\nclass Solution:\n    def minElement(self, nums):\n        return 1\n```")
    assert functional.verdict == "error" and "functional" in functional.detail


def test_livecodebench_time_limit_and_unreadable_cases():
    slow = livecodebench.grade_livecodebench("```python\nwhile True:\n    pass\n```", LCB_CASES, timeout_s=1)
    assert (slow.verdict, slow.detail) == ("timeout", "case 1 of 3: over the time limit")
    assert livecodebench.grade_livecodebench(RIGHT, "not json").verdict == "error"
    assert livecodebench.grade_livecodebench(RIGHT, "[]").detail == "the item has no public test cases"
    assert livecodebench.grade_livecodebench("print(3)", [{"input": "", "output": "3.0\n"}]).verdict == "pass"


def test_livecodebench_program_sees_only_its_own_files():
    listing = "```python\nimport os\nprint(sorted(os.listdir('.')))\n```"
    cases = [{"input": "", "output": "['input.txt', 'output.txt', 'solution.py']\n", "testtype": "stdin"}]
    assert livecodebench.grade_livecodebench(listing, cases).verdict == "pass"  # the runner (and its cases) gone


@needs_root
def test_livecodebench_program_runs_as_the_sandbox_user():
    uid = pwd.getpwnam(CODE_USER).pw_uid
    cases = [{"input": "", "output": f"{uid}\n", "testtype": "stdin"}]
    assert livecodebench.grade_livecodebench("```python\nimport os\nprint(os.getuid())\n```", cases).verdict == "pass"
