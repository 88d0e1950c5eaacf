"""Full-text analysis: the analyzer (text -> terms) and the query language."""
from .analyzer import Analyzer, TokenBatch
from .query import And, Not, Or, Phrase, Prefix, Term, bind, parse

__all__ = ["Analyzer", "TokenBatch", "parse", "bind", "Term", "Prefix", "Phrase",
           "And", "Or", "Not"]
