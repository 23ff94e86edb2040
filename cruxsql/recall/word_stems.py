"""The stem of a word in recall's word index: English irregular forms to their base form, the Snowball
English (Porter2) stemmer, then the document lane's suffix stemmer (`documents.analyzer.stem`, Crux's)
until it settles.

Snowball unites what Crux's stemmer leaves apart (`running`/`run`, `happiness`/`happy`,
`studies`/`studying`, `activities`/`activity`, `relaxation`/`relax`); Crux's stemmer after it keeps
what only it unites (`owner`/`owns`, `payments`/`pay`), which the service workload's questions rely on
("who owns X" for a fact keyed `owner`). Measured on LoCoMo (tools/bench/bench_locomo.py, no model,
evidence in the top 5 / 10): turns 0.648 / 0.722 -> 0.660 / 0.729, extracted observations 0.547 / 0.593
-> 0.564 / 0.608; the service workload's keyword and question recall@5 unchanged (docs/performance.md).
The `snowballstemmer` package is the Snowball project's own pure-Python build: no compiled part, no
dependency, BSD-licensed.
"""

from __future__ import annotations

import snowballstemmer

from ..documents.analyzer import stem

# forms no suffix rule can take to their base form (`went` -> `go`, `children` -> `child`)
IRREGULAR = dict(pair.split(":") for pair in """
went:go gone:go goes:go found:find made:make took:take taken:take bought:buy saw:see seen:see met:meet felt:feel
began:begin begun:begin ran:run won:win wrote:write written:write gave:give given:give told:tell
thought:think brought:bring kept:keep left:leave lost:lose taught:teach held:hold built:build sent:send
spent:spend came:come became:become chose:choose chosen:choose drew:draw drawn:draw ate:eat eaten:eat
flew:fly flown:fly grew:grow grown:grow heard:hear knew:know known:know paid:pay sang:sing sung:sing
sold:sell swam:swim threw:throw thrown:throw wore:wear worn:wear caught:catch fought:fight fell:fall
fallen:fall forgot:forget forgotten:forget slept:sleep spoke:speak spoken:speak stood:stand
understood:understand woke:wake driven:drive drove:drive rode:ride ridden:ride broke:break broken:break
children:child men:man women:woman feet:foot teeth:tooth mice:mouse people:person
""".split())

_SNOWBALL = snowballstemmer.stemmer("english")


def word_stem(word: str) -> str:
    """A lowercased word's stem (`payments` -> `pay`, `went` -> `go`, `running` -> `run`)."""
    word = _SNOWBALL.stemWord(IRREGULAR.get(word, word))
    for _ in range(3):
        stemmed = stem(word)
        if stemmed == word:
            break
        word = stemmed
    return word
