"""Prompt templates are bounded (issue 11 break-it follow-up): no template can hang a render,
exhaust memory, or print a Python repr; what provably goes over a limit is refused when the
template is LOADED (one line naming FILE:LINE), the rest fails the render with its reason
within the limits (judgecal.judge.sandbox, docs/rating.md)."""

from __future__ import annotations

import time

import pytest

from judgecal.errors import InputError
from judgecal.judge import sandbox
from judgecal.judge.prompts import load_prompt

TEMPLATE = """---
name: t
mode: pointwise
scale_min: 1
scale_max: 10
verdict: "[[rating]]"
roles: [user]
---
{{% block user %}}{body}{{% endblock %}}
"""
VARS = dict(question="What is 2 + 2?", response="It is 4.\tFour.", reference="4")


def _file(tmp_path, body):
    f = tmp_path / "t.md"
    f.write_text(TEMPLATE.format(body=body), encoding="utf-8")
    return f


def _load_error(tmp_path, body) -> str:
    f = _file(tmp_path, body)
    with pytest.raises(InputError) as info:
        load_prompt(str(f))
    line = str(info.value)
    assert "\n" not in line and line.startswith(f"{f}:9: template refused: "), line
    return line


def _render_error(tmp_path, body, **kw) -> tuple[str, float]:
    p = load_prompt(str(_file(tmp_path, body)))
    t0 = time.perf_counter()
    with pytest.raises(InputError) as info:
        p.render(**VARS, **kw)
    line = str(info.value)
    assert "\n" not in line and line.startswith(str(p.path) + ": "), line
    return line, time.perf_counter() - t0


# ------------------------------------------------------------------ case 1: hangs
@pytest.mark.parametrize("body,reason", [
    ("{% set s='x'*1000000 %}{% for a in s %}{% for b in s %}{% endfor %}{% endfor %}",
     "the loops run 1,000,001,000,000 iterations; a render may run at most 1,000,000"),
    ("{{ ((((10**100)**100)**100)**100) }}", "a power of at least 33,201 bits"),
    ("{% set a=2 %}" + "{% set a=a*a %}" * 22 + "{{ a }}", "a product of 16,386 bits"),
    ("{{ 2**10000 }}", "a power of at least 10,001 bits"),
])
def test_hanging_templates_refused_at_load(tmp_path, body, reason):
    line = _load_error(tmp_path, body)
    assert reason in line and "whatever the variables hold" in line


@pytest.mark.parametrize("body,reason", [
    # the same shapes built from a variable: known only while rendering
    ("{% set s=question*50000 %}{% for a in s %}{% for b in s %}{% endfor %}{% endfor %}",
     "more than 1,000,000 steps (loop iterations and calls)"),
    ("{% set a=question|length %}" + "{% set a=a*a %}" * 22 + "{{ a }}", "a template may compute integers of at most 10,000 bits"),
    ("{% macro m(n) %}{% if n %}{{ m(n-1) }}{{ m(n-1) }}{% endif %}{% endmacro %}{{ m(question|length + 20) }}",
     "more than 1,000,000 steps"),
    ("{% set s=question*50000 %}{% for a in s %}{{ a.upper() }}{% endfor %}", "more than 1,000,000 steps"),
])
@pytest.mark.timeout(120)  # a hang guard, not a speed claim: without the step limit these run for hours
def test_hanging_templates_fail_the_render_quickly(tmp_path, body, reason):
    line, _ = _render_error(tmp_path, body)
    assert "the template went over a limit: " in line and reason in line


def test_render_time_limit(tmp_path):
    """A render that stays under the size and step limits but is slow stops at its time limit."""
    body = "{% set s=question*7000 %}{% for a in s[:50000] %}{{ s|wordcount }}{% endfor %}"
    line, took = _render_error(tmp_path, body, time_limit_s=0.3)
    assert line.endswith("the template went over a limit: the template took longer than 0.3 s to render")
    assert 0.3 <= took < 30.0  # the render alone runs for minutes: the limit stopped it


def test_render_can_be_aborted_from_outside(tmp_path):
    import threading

    p = load_prompt(str(_file(tmp_path, "{% set s=question*7000 %}{% for a in s[:50000] %}{{ s|wordcount }}{% endfor %}")))
    stop = threading.Event()
    threading.Timer(0.2, stop.set).start()
    t0 = time.perf_counter()
    with pytest.raises(sandbox.RenderAborted):
        p.render(**VARS, abort=stop)
    assert time.perf_counter() - t0 < 30.0  # the render alone runs for minutes: the abort stopped it


# ------------------------------------------------------------------ case 2: huge strings
@pytest.mark.parametrize("body,reason", [
    ("{{ question.ljust(400000000) }}", "ljust() width 400,000,000 is over the limit of 2,000,000 characters"),
    ("{{ '%0*d'|format(400000000,1) }}", "the %-formatted text would hold 400,000,028 characters"),
    ("{{ '%400000000d' % 1 }}", "the %-format '%400000000d' asks for 400,000,000 characters"),
    ("{{ '{:>400000000}'.format(question) }}", "the format spec '>400000000' asks for 400,000,000 characters"),
    ("{{ question|center(400000000) }}", "center width 400,000,000 is over the limit"),
    ("{{ question.zfill(400000000) }}", "zfill() width 400,000,000 is over the limit"),
    ("{{ 'x\\t'.expandtabs(400000000) }}", "expandtabs() tab size 400,000,000 is over the limit"),
    ("{% set s='x'*1000000 %}{{ s~s~s }}", "the ~ concatenation would hold 3,000,000 characters"),
    ("{{ (['x'*1000000]*1000)|join }}", "a repetition would hold 1,000,003,000 characters"),
    ("{{ question|indent(400000000) }}", "indent width 400,000,000"),
    ("{{ [1]|batch(400000000, 'x')|list }}", "batch size 400,000,000"),
    ("{{ [1]|slice(400000000)|list }}", "number of slices 400,000,000"),
    ("{{ (' ' * 500000)|wordwrap(1) }}", "wordwrap at width 1 of a run of 500,000 characters without (or of) spaces "
                                         "would copy 250,000,500,000 characters; at most 200,000,000"),
])
def test_huge_strings_refused_at_load(tmp_path, body, reason):
    assert reason in _load_error(tmp_path, body)


@pytest.mark.parametrize("body,reason", [
    ("{% set s=question*100000 %}{{ s~s~s }}", "the ~ concatenation would hold 4,200,000 characters"),
    ("{% set l=[question*70000] %}{{ (l*1000)|join }}", "a repetition would hold 980,003,000 characters"),
    ("{{ (question*100000)|replace('', question) }}", "replace() would hold 21,000,014 characters"),
    ("{{ question.replace(' ', question*100000) }}", "replace() would hold 5,600,010 characters"),
    ("{{ (question*100000)|wordwrap(1, wrapstring=question) }}", "wordwrap would hold"),
    # textwrap is quadratic in a long run: refused before it starts, not after minutes
    ("{{ ((question|replace(' ', '')) * 100000)|wordwrap(5) }}", "wordwrap at width 5 of a run of 1,000,000 characters"),
    ("{{ question|map('upper')|list|length }}{{ (question * 100000)|map('upper')|list|length }}",
     "more than 1,000,000 steps"),
    ("{% set w = question|length * 30000000 %}{{ question.ljust(w) }}", "ljust() width 420,000,000"),
    ("{% set w = question|length * 30000000 %}{{ '{:>{w}}'.format(question, w=w) }}",
     "the format spec '>420000000' asks for 420,000,000 characters"),
    ("{% set w = question|length * 30000000 %}{{ '%0*d'|format(w, 1) }}", "the %-formatted text would hold"),
    ("{% set w = question|length * 30000000 %}{{ '%*s' % (w, question) }}", "the %-formatted text would hold"),
    ("{% set a=[question*100000] %}{% set b=[a,a,a,a,a,a,a,a,a,a] %}{{ b|string }}",
     "an argument of the 'string' filter holds more than 2,000,000 characters"),
    ("{% set a=[question*100000] %}{% set b=[a,a,a,a,a,a,a,a,a,a] %}{{ b }}",
     "a printed value holds more than 2,000,000 characters"),
    # each piece is under the limit, the prompt is not
    ("{% set s=question*100000 %}{% for i in [1,2,3] %}{{ s }}{% endfor %}",
     "the rendered prompt has more than 2,000,000 characters"),
    ("{% set s=question*10000 %}{% for i in question*100 %}{% set x %}{{ s }}{% endset %}{% endfor %}",
     "builds more than 20,000,000 characters in one render"),
])
@pytest.mark.timeout(120)  # a hang guard: without the limits these build gigabytes
def test_huge_strings_fail_the_render(tmp_path, body, reason):
    line, _ = _render_error(tmp_path, body)
    assert "the template went over a limit: " in line and reason in line


# ------------------------------------------------------------------ case 5: internals, methods, self
@pytest.mark.parametrize("body,reason", [
    ("{{ question|map('attr','__class__')|list }}", "access to '__class__' in the 'map' filter"),
    ("{{ [question]|map(attribute='__class__')|list }}", "access to '__class__' in the 'map' filter"),
    ("{{ [question]|groupby('__class__') }}", "access to '__class__' in the 'groupby' filter"),
    ("{{ question|selectattr('__class__')|list }}", "access to '__class__' in the 'selectattr' filter"),
    ("{{ question|sort(attribute='__class__') }}", "access to '__class__' in the 'sort' filter"),
    ("{{ [question]|sort(false, false, 'x.__len__') }}", "access to '__len__' in the 'sort' filter"),
    ("{{ [question]|map(attribute=question)|list }}", "the 'map' filter needs a constant attribute name"),
    ("{{ '{0.__class__}'.format(question) }}", "access to '__class__' in a format string"),
    ("{{ '{0.upper}'.format(question) }}", "the format field {0.upper} reads the method 'upper'"),
    ("{{ self }}", "'self' (the template object) is not available"),
    ("{{ self.user() }}", "'self' (the template object) is not available"),
    ("{{ question.encode }}", "method 'encode' is not available in prompt templates"),
    ("{{ question.encode() }}", "method 'encode' is not available in prompt templates"),
    ("{{ question|attr('translate') }}", "method 'translate' (in the 'attr' filter) is not available"),
    ("{% for x in [1] %}{{ loop.cycle }}{% endfor %}", "'.cycle' is a method: a template may call it"),
    ("{% for x in [1] %}{{ loop }}{% endfor %}", "'loop' alone is not a value a template can print or pass"),
    ("{{ question.upper }}", "'.upper' is a method"),
    ("{{ question.upper ~ '' }}", "'.upper' is a method"),
    ("{{ question|map('random')|list }}", "unknown filter 'random' (in the 'map' filter)"),
    ("{{ question|random }}", "unknown filter 'random' (not available in prompt templates)"),
    ("{{ question|select('nosuchtest')|list }}", "unknown test 'nosuchtest' (in the 'select' filter)"),
    ("{% for x in question.split() recursive %}{{ loop(x) }}{% endfor %}", "recursive loops are not available"),
])
def test_internals_and_reprs_refused_at_load(tmp_path, body, reason):
    assert reason in _load_error(tmp_path, body)


@pytest.mark.parametrize("body,reason", [
    # the same reached through values the load-time check cannot see
    ("{% set d={'m': question} %}{{ d.m.upper }}", "a printed value is a method or function (call it)"),
    ("{{ [question]|map(attribute='upper')|list }}", "a printed value is a method or function"),
    ("{{ [question]|map(attribute='upper')|join }}", "a joined item is a method or function"),
    ("{% set d={'m': question} %}{% set f = d.m.split %}{{ f ~ '' }}", "a ~ operand is a method or function"),
    ("{{ question|map('upper') }}", "a printed value is a lazy sequence (add |list or |join)"),
    ("{{ question|map('upper')|string }}", "the value of the 'string' filter is a lazy sequence"),
    ("{{ '%s' % (question|map('upper')) }}", "a %-format value is a lazy sequence"),
    ("{{ '{}'.format(question|map('upper')) }}", "a format field is a lazy sequence"),
    ("{{ question['encode'] }}", "str.encode is not available in prompt templates"),
    ("{% set k='__class__' %}{{ question|attr(k) }}", "the 'attr' filter needs a constant attribute name"),
    ("{{ question.format(question) }}", None),  # the variable's text as a format string: no fields here
])
def test_internals_and_reprs_fail_the_render(tmp_path, body, reason):
    if reason is None:
        assert load_prompt(str(_file(tmp_path, body))).render(**VARS)[0]["content"] == VARS["question"]
        return
    if "needs a constant" in reason:
        assert reason in _load_error(tmp_path, body)
        return
    line, _ = _render_error(tmp_path, body)
    assert reason in line and "0x" not in line


def test_format_string_from_a_variable_cannot_reach_internals(tmp_path):
    p = load_prompt(str(_file(tmp_path, "{{ question.format(response) }}")))
    with pytest.raises(InputError, match="access to attribute '__class__' of a 'str' object is not allowed"):
        p.render(question="{0.__class__}", response="x")
    with pytest.raises(InputError, match="format spec '>9999999' asks for 9,999,999 characters"):
        p.render(question="{0:>9999999}", response="x")


# ------------------------------------------------------------------ what still works
@pytest.mark.parametrize("body,expected", [
    ("{{ question }} | {{ response }}", "What is 2 + 2? | It is 4.\tFour."),
    ("{% for x in [1,2,3] %}{{ loop.cycle('a','b') }}{{ loop.index }}{% endfor %}", "a1b2a3"),
    ("{% set d = {'title': 'T', 'index': 3} %}{{ d.title }} {{ d.index }} {{ d['title'] }}", "T 3 T"),
    ("{{ question.split()|join(',') }}/{{ question.replace('2', 'two') }}", "What,is,2,+,2?/What is two + two?"),
    ("{{ '%d-%s'|format(3, reference) }} {{ '{}!'.format(reference) }} {{ '%05.1f' % 2.25 }}", "3-4 4! 002.2"),
    ("{{ question|upper|truncate(9, leeway=0) }} {{ [3,1,2]|sort|list }} {{ response|wordcount }}", "WHAT... [1, 2, 3] 4"),
    ("{% macro shot(q, a) %}Q: {{ q }} A: {{ a }}{% endmacro %}{{ shot(question, reference) }}",
     "Q: What is 2 + 2? A: 4"),
    ("{{ response.expandtabs(4) }} {{ reference.zfill(3) }} {{ reference.center(5, '*') }}", "It is 4.    Four. 004 **4**"),
    ("{{ 3**4 }} {{ 2**100 }} {{ (question*1000)|length }}", "81 1267650600228229401496703205376 14000"),
    ("{{ [question, reference]|map('length')|list }} {{ {'a': 1}.items()|list }}", "[14, 1] [('a', 1)]"),
    ("{{ [[1], [2, 3]]|sum(start=[]) }} {{ [(1,), (2,)]|sum(start=()) }} {{ [1.5, 2]|sum }} {{ [{'n': 4}]|sum('n') }}",
     "[1, 2, 3] (1, 2) 3.5 4"),
])
def test_ordinary_templates_render(tmp_path, body, expected):
    p = load_prompt(str(_file(tmp_path, body)))
    assert p.render(**VARS) == [{"role": "user", "content": expected}]


def test_shipped_prompts_render_under_the_limits():
    for name in ("pointwise_v1", "pointwise_ref_v1", "pairwise_v1", "pointwise_fewshot_v1"):
        p = load_prompt(name)
        msgs = p.render(question="Q" * 300_000, response="R" * 300_000, reference="F", response_a="A" * 400_000,
                        response_b="B" * 400_000)
        assert sum(len(m["content"]) for m in msgs) < sandbox.MAX_TEXT


def test_sum_of_lists_is_linear(tmp_path):
    """Python's sum() of 240 000 one-item lists copies the running total each time (minutes,
    in C, beyond the time limit); the sandbox's sum concatenates in one pass."""
    p = load_prompt(str(_file(tmp_path, "{% set l = [[1]] * 240000 %}{{ l|sum(start=[])|length }}")))
    assert p.render(**VARS) == [{"role": "user", "content": "240000"}]  # quadratic, it would hit the time limit


def test_prompt_files_over_one_mib_are_refused(tmp_path):
    f = _file(tmp_path, "x" * (1024 * 1024))
    with pytest.raises(InputError, match=r"t\.md: the prompt file has 1,048,7\d\d bytes; a prompt template may have at "
                                         r"most 1,048,576$"):
        load_prompt(str(f))
    (tmp_path / "big.txt").write_text("y" * (1024 * 1024 + 1), encoding="utf-8")
    line = _load_error(tmp_path, "{% include 'big.txt' %}")
    assert line.endswith("include of 'big.txt': the file has 1,048,577 bytes; a prompt template may have at most 1,048,576")
