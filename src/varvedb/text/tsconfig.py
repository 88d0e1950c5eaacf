"""PostgreSQL's text search configurations that varvedb reads text as.

Two are known: 'simple' (every word lowercased, kept as it is) and 'english'
(lowercased; the stop words below dropped, each still taking its position;
the rest stemmed by the Snowball English stemmer, PyStemmer's). A name may
carry PostgreSQL's schema (`pg_catalog.english`). A configuration PostgreSQL
has and varvedb does not ('french', ...) is refused with 0A000 naming the two;
a name PostgreSQL does not know either is 42704, as PostgreSQL says.

The stop words are the Snowball project's short English list, the one
PostgreSQL's english configuration reads, written out here.
"""
from __future__ import annotations

from ..errors import SqlError

CONFIGS = ("english", "simple")

# the configurations a stock PostgreSQL has (its other Snowball languages)
_POSTGRES_HAS = frozenset(
    "arabic armenian basque catalan danish dutch finnish french german greek hindi "
    "hungarian indonesian irish italian lithuanian nepali norwegian portuguese romanian "
    "russian serbian spanish swedish tamil turkish yiddish".split())

_ENGLISH_STOP = frozenset("""
i me my myself we our ours ourselves you your yours yourself yourselves he him his
himself she her hers herself it its itself they them their theirs themselves what which
who whom this that these those am is are was were be been being have has had having do
does did doing a an the and but if or because as until while of at by for with about
against between into through during before after above below to from up down in out on
off over under again further then once here there when where why how all any both each
few more most other some such no nor not only own same so than too very s t can will just
don should now
""".split())


def config_name(config) -> str:
    """The configuration a SQL argument names (lowercased, its schema dropped);
    SqlError where varvedb has no such configuration."""
    if not isinstance(config, str):
        raise SqlError("42883", f"a text search configuration is named by text, got "
                                f"{type(config).__name__}")
    name = config.strip().lower()
    if name.startswith("pg_catalog."):
        name = name[len("pg_catalog."):]
    if name in CONFIGS:
        return name
    if name in _POSTGRES_HAS:
        raise SqlError("0A000", f'text search configuration "{config}" is not supported: '
                                f"varvedb has {' and '.join(repr(c) for c in CONFIGS)}")
    raise SqlError("42704", f'text search configuration "{config}" does not exist '
                            f"(varvedb has {' and '.join(repr(c) for c in CONFIGS)})")


def check_config(config) -> None:
    """An analyzer's config= is one of CONFIGS (OptionError otherwise)."""
    if config not in CONFIGS:
        from ..errors import OptionError
        raise OptionError(f"no text search configuration {config!r}; the configurations "
                          f"are {', '.join(CONFIGS)}")


def stop_words(config: str) -> frozenset:
    return _ENGLISH_STOP if config == "english" else frozenset()


def stemmer_of(config: str) -> str | None:
    """The Snowball language a configuration stems in (None: no stemming)."""
    return "english" if config == "english" else None
