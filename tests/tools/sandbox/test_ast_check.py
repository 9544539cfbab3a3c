"""Tests for the AST pre-filter that screens LLM-written Python before it is sandboxed."""

from __future__ import annotations

import pytest

from backend.tools.sandbox.ast_check import ALLOWED_MODULES, check_code

ALLOWED_SNIPPETS = {
    "pandas_groupby": (
        "import pandas as pd\n"
        "df = pd.DataFrame({'g': ['a', 'b', 'a'], 'v': [1, 2, 3]})\n"
        "print(df.groupby('g')['v'].sum())\n"
    ),
    "numpy": "import numpy as np\nx = np.linspace(0, 1, 5)\nprint(x.mean(), np.__version__)\n",
    "matplotlib": (
        "import matplotlib\nmatplotlib.use('Agg')\nimport matplotlib.pyplot as plt\n"
        "fig, ax = plt.subplots()\nax.plot([1, 2], [3, 4])\nfig.savefig('plot.png')\n"
    ),
    "json": "import json\nprint(json.dumps({'a': 1}))\n",
    "open_relative": "with open('data.csv') as fh:\n    rows = fh.read().splitlines()\n",
    "getattr_literal": "import numpy as np\nx = np.arange(3)\nprint(getattr(x, 'mean')())\n",
    "hasattr_setattr_literal": "class A:\n    pass\na = A()\nsetattr(a, 'x', 1)\nhasattr(a, 'x')\n",
    "np_version": "import numpy as np\nprint(np.__version__)\n",
    "allowed_dunders": "def f():\n    'doc'\nprint(f.__name__, f.__doc__, [1].__len__())\n",
    "from_submodule": "from sklearn.linear_model import LinearRegression\nimport scipy.stats\n",
    "re_compile_imported": "from re import compile\npat = compile(r'\\d+')\n",
    "re_module_compile": "import re\npat = re.compile('a+')\n",
    "fstring": "x = 3\nprint(f'{x!r:>10} {x + 1}')\n",
    "format_plain": "print('{0} {name:>5}'.format(1, name='x'))\n",
    "invalid_escape": "import re\nprint(re.findall('\\d', 'a1'))\n",
    "dunder_main_guard": "if __name__ == '__main__':\n    print('hi')\n",
    "empty": "",
    "match": "match [1]:\n    case [x]:\n        print(x)\n",
}


@pytest.mark.parametrize("code", ALLOWED_SNIPPETS.values(), ids=ALLOWED_SNIPPETS.keys())
def test_allowed_snippets_pass(code: str) -> None:
    assert check_code(code) == []


BLOCKED = [
    ("import os", 1, "'os'"),
    ("x = 1\nimport subprocess", 2, "'subprocess'"),
    ("from os import path", 1, "'os'"),
    ("import os.path as p", 1, "'os.path'"),
    ("import numpy, ctypes", 1, "'ctypes'"),
    ("import importlib\nimportlib.import_module('os')", 1, "'importlib'"),
    ("import sys\nsys.modules['os']", 1, "'sys'"),
    ("from . import secrets", 1, "relative import"),
    ("from .. import x", 1, "relative import"),
    ('m = __import__("o" + "s")', 1, "'__import__'"),
    ("().__class__.__bases__[0].__subclasses__()", 1, "'__class__'"),
    ("().__class__.__bases__[0].__subclasses__()", 1, "'__bases__'"),
    ("().__class__.__bases__[0].__subclasses__()", 1, "'__subclasses__'"),
    ("def f():\n    pass\nf.__globals__", 3, "'__globals__'"),
    ("x.__dict__['a'] = 1", 1, "'__dict__'"),
    ('getattr(x, "__cla" + "ss__")', 1, "string literal"),
    ("name = 'mean'\ngetattr(x, name)", 2, "getattr()"),
    ("setattr(x, n, 1)", 1, "setattr()"),
    ("getattr(x, *args)", 1, "getattr()"),
    ("getattr(x)", 1, "getattr()"),
    ('getattr(x, "__class__")', 1, "'__class__'"),
    ('delattr(x, "__dict__")', 1, "'__dict__'"),
    ("g = getattr\ng(x, name)", 1, "'getattr'"),
    ("vars(__builtins__)", 1, "'vars'"),
    ("vars(__builtins__)", 1, "'__builtins__'"),
    ("print(__loader__)", 1, "'__loader__'"),
    ("s = __spec__", 1, "'__spec__'"),
    ('@exec\n@"print(1)".format\nclass A:\n    pass', 1, "'exec'"),
    ('"{0.__globals__}".format(f)', 1, "format string"),
    ('str.format("{0.__class__}", f)', 1, "format string"),
    ('"{x:{y.__class__}}".format(x=1, y=2)', 1, "format string"),
    ('"{0.__init__}".format_map(d)', 1, "format string"),
    ('eval("1")', 1, "'eval'"),
    ("f = eval", 1, "'eval'"),
    ("exec('x=1')", 1, "'exec'"),
    ("c = compile('1', 'f', 'eval')", 1, "'compile'"),
    ("globals()['x'] = 1", 1, "'globals'"),
    ("input('name? ')", 1, "'input'"),
    ("breakpoint()", 1, "'breakpoint'"),
    ("memoryview(b'x')", 1, "'memoryview'"),
    ("exit()", 1, "'exit'"),
    ("x = 1\ny = f'{x.__class__}'", 2, "'__class__'"),
    ("match x:\n    case object(__class__=c):\n        pass", 2, "'__class__'"),
    ("from numpy import __builtins__", 1, "'__builtins__'"),
    ("lambda: 0\n(lambda: 0).__code__", 2, "'__code__'"),
    ("x = object.__getattribute__", 1, "'__getattribute__'"),
    ("class A(object):\n    pass\nA.__mro__", 3, "'__mro__'"),
]


@pytest.mark.parametrize(("code", "line", "needle"), BLOCKED)
def test_blocked_code_names_offender_and_line(code: str, line: int, needle: str) -> None:
    problems = check_code(code)
    assert problems, code
    assert all(p.startswith("line ") for p in problems)
    assert any(p.startswith(f"line {line}: ") and needle in p for p in problems), problems


def test_disallowed_import_message_lists_allowed_packages_briefly() -> None:
    (problem,) = check_code("import numpy as np\n\nimport subprocess\n")
    assert problem.startswith("line 3: import of 'subprocess' is not allowed")
    assert "numpy" in problem and "pandas" in problem and problem.endswith("...)")
    assert "contextlib" not in problem


@pytest.mark.parametrize(
    ("code", "line"),
    [("x = 1\ny = (\n", 2), ("def f(:\n    pass", 1), ("a = 1\nb = 2\nif x\n", 3)],
)
def test_syntax_error_reports_line(code: str, line: int) -> None:
    (problem,) = check_code(code)
    assert problem.startswith(f"line {line}: syntax error: ")


def test_indentation_error_is_a_syntax_error() -> None:
    (problem,) = check_code("if True:\nprint(1)\n")
    assert problem.startswith("line 2: syntax error: ")


@pytest.mark.parametrize(("code", "line"), [("a\0b", 1), ("x = 1\ny = 2\x00\n", 2)])
def test_null_bytes_give_a_message(code: str, line: int) -> None:
    (problem,) = check_code(code)
    assert problem.startswith(f"line {line}: syntax error: ")


@pytest.mark.parametrize(
    "code",
    [
        "(" * 5000 + ")" * 5000,
        "[" * 300 + "]" * 300,
        "-" * 100_000 + "1",
        "1+" * 100_000 + "1",
        "x" + ".a" * 100_000,
        "x = '\ud800'",
        "f(" * 150 + ")" * 150,
    ],
    ids=["parens", "lists", "unary", "binop", "attr_chain", "surrogate", "calls"],
)
def test_pathological_input_never_raises(code: str) -> None:
    problems = check_code(code)
    assert isinstance(problems, list)
    assert all(isinstance(p, str) and p.startswith("line ") for p in problems)


def test_deeply_nested_parens_report_syntax_error() -> None:
    (problem,) = check_code("(" * 5000 + ")" * 5000)
    assert problem.startswith("line 1: syntax error: ")


def test_messages_are_deduplicated_and_capped() -> None:
    problems = check_code("eval; eval\nx = eval")
    assert len(problems) == 2
    assert problems[0].startswith("line 1: use of 'eval'")
    assert problems[1].startswith("line 2: use of 'eval'")
    many = check_code("\n".join(f"import os{i}" for i in range(50)))
    assert len(many) == 20
    assert many[0].startswith("line 1: ") and many[-1].startswith("line 20: ")


def test_locally_imported_names_shadow_blocked_builtins() -> None:
    assert check_code("from re import compile as eval\neval('x')") == []
    assert check_code("import os as eval") != []


def test_allowed_modules_contents() -> None:
    assert isinstance(ALLOWED_MODULES, frozenset)
    assert {"numpy", "pandas", "json", "pathlib", "contextlib"} <= ALLOWED_MODULES
    assert not {"os", "sys", "subprocess", "ctypes", "importlib", "builtins"} & ALLOWED_MODULES


def test_large_input_is_checked_whole() -> None:
    code = "import numpy as np\n" + "x = np.arange(10).mean()\n" * 20_000 + "import os\n"
    problems = check_code(code)
    assert len(problems) == 1
    assert problems[0].startswith("line 20002: import of 'os' is not allowed")
