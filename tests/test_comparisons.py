"""Path conditions comparing one expression with integers: which sets of them can hold together."""
import operator

import libcst as cst
from hypothesis import given
from hypothesis import strategies as st

from trainlint.static.comparisons import Comparison, comparison, floors, satisfiable

_PYTHON = {"==": operator.eq, "!=": operator.ne, ">": operator.gt, ">=": operator.ge, "<": operator.lt, "<=": operator.le}
_facts = st.lists(st.tuples(st.builds(Comparison, st.just("k"), st.sampled_from(sorted(_PYTHON)), st.integers(-6, 6)),
                            st.booleans()), max_size=5)


@given(_facts, st.one_of(st.none(), st.integers(-6, 6)))
def test_satisfiable_agrees_with_trying_every_integer_that_could_matter(facts, floor):
    def meets(value):
        return (floor is None or value >= floor) and all(_PYTHON[c.operator](value, c.bound) == holds for c, holds in facts)

    assert satisfiable(facts, floor) == any(meets(value) for value in range(-20, 21))


def _comparison(text):
    module = cst.parse_module("")
    return comparison(cst.parse_expression(text), module.code_for_node)


def test_only_a_comparison_of_an_expression_with_an_integer_literal_counts():
    assert _comparison("self.accum_count > 1") == Comparison("self.accum_count", ">", 1)
    assert _comparison("step == -1") == Comparison("step", "==", -1)
    assert _comparison("a < b") is None and _comparison("0 < k < 5") is None and _comparison("k > 1.5") is None


def test_the_cases_a_program_distinguishes_give_the_least_value_it_expects():
    tested = [_comparison(t) for t in ("accum == 1", "accum > 1", "rank == 0", "rank > 0", "rank < 4", "world > 1")]
    assert floors(tested) == {"accum": 1}  # rank is also tested from below; world has one case only
    neither = [(Comparison("accum", "==", 1), False), (Comparison("accum", ">", 1), False)]
    assert satisfiable(neither, None) and not satisfiable(neither, floors(tested)["accum"])
