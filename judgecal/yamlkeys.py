"""A YAML loader that refuses a mapping giving a key twice (PyYAML keeps the last value
silently): judge prompt front matter and multiple-choice task configs are read with it."""

from __future__ import annotations

import yaml


class UniqueKeyLoader(yaml.SafeLoader):
    """:class:`yaml.SafeLoader` whose mappings refuse a repeated key: raises
    ``yaml.constructor.ConstructorError`` whose ``problem`` says "key 'k' appears twice in one
    mapping" and whose ``problem_mark`` is the repeated key's position."""

    def construct_mapping(self, node, deep=False):
        if isinstance(node, yaml.MappingNode):
            seen: set = set()
            for key_node, _ in node.value:
                key = self.construct_object(key_node, deep=True)
                if isinstance(key, (str, int, float, bool)):
                    if key in seen:
                        raise yaml.constructor.ConstructorError(
                            None, None, f"key {key!r} appears twice in one mapping: which value is meant?",
                            key_node.start_mark)
                    seen.add(key)
        return super().construct_mapping(node, deep=deep)


def is_repeat(exc: BaseException) -> bool:
    """Whether a YAML error is :class:`UniqueKeyLoader`'s repeated key."""
    return isinstance(exc, yaml.constructor.ConstructorError) and "appears twice" in str(getattr(exc, "problem", ""))
