"""SimCSE's data files that ``python -m hf_cse.download`` fetches: their names, where the paper configs expect them,
their checksums, and what a message about a missing one says (:func:`download_hint`, read by the training code,
which never imports the commands)."""

from __future__ import annotations

import os
import posixpath
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class DataFile:
    """A file of SimCSE's data: its name on the server, where the paper configs expect it, and its checksum.

    Attributes:
        name: what the command line calls it (``wiki1m``, ``nli``, ``senteval``).
        filename: the file's name under ``--base_url``.
        path: where it is saved, relative to ``--dest`` (POSIX separators).
        sha256: the SHA-256 (hex) of the file that :data:`DEFAULT_BASE_URL` serves.
        extract: whether it is a tar archive to extract in the folder it is saved in.
        by_default: whether a run that names no dataset fetches it.
        without_download: what serves instead of this file, said when the server cannot be reached or refuses it (a
            user offline may hold a copy from elsewhere).
    """

    name: str
    filename: str
    path: str
    sha256: str
    extract: bool = False
    by_default: bool = True
    without_download: str = ""


# The checksums are the Git LFS object ids on the Hub (https://huggingface.co/datasets/princeton-nlp/
# datasets-for-simcse): wiki1m_for_simcse.txt and nli_for_simcse.csv as added in commit d0065b9 ("init", both
# unchanged since: the file page of nli_for_simcse.csv at d0065b9 shows this SHA256, 49 MB, and the tree of main
# lists it as last changed by "init"); senteval.tar as replaced in commit e145e8b ("update senteval data", Sep 3
# 2021, still the head of main; 89,825,280 bytes). The earlier senteval.tar versions (6,320,717 bytes in May 2021,
# 92,538,880 bytes in 278e782) are other files.
DATA_FILES: dict[str, DataFile] = {
    data_file.name: data_file
    for data_file in (
        DataFile(
            "wiki1m",
            "wiki1m_for_simcse.txt",
            "data/wiki1m_for_simcse.txt",
            sha256="7b1825863a99aa76479b0456f7c210539dfaeeb69598b41fb4de4f524dd5a706",
            without_download="Any text file of one sentence a line serves as train_file.",
        ),
        DataFile(
            "nli",
            "nli_for_simcse.csv",
            "data/nli_for_simcse.csv",
            sha256="0747687ec3594fa449d2004fd3757a56c24bf5f7428976fb5b67176775a68d48",
            by_default=False,  # only the supervised configs read it: see the module docstring
            without_download="Any CSV with sent0,sent1[,hard_neg] or anchor,positive[,negative] columns serves as "
            "train_file.",
        ),
        DataFile(
            "senteval",
            "senteval.tar",
            "SentEval/data/downstream/senteval.tar",
            sha256="bc43c148f7be97471c78fc4255399d3158cb99dfe8f2221999c918338b138c38",
            extract=True,
            # The files hf_cse.evaluation.sts_data reads (its module docstring gives the layout in full).
            without_download="Any folder in SentEval's layout serves as --sts_dir: STS12-en-test/ to STS16-en-test/ "
            "(STS.input.SUBSET.txt and STS.gs.SUBSET.txt for each of SentEval's subsets), STSBenchmark/"
            "sts-{train,dev,test}.csv and SICK/SICK_{train,trial,test_annotated}.txt (SICK/ inside it or beside it).",
        ),
    )
}

DEFAULT_DATASETS = [name for name, data_file in DATA_FILES.items() if data_file.by_default]
"""What a run that names no dataset fetches: wiki1m and senteval."""


def download_hint(path: str | os.PathLike) -> str:
    """How to get the missing file ``path`` where it has the name of a file this command saves (a run's
    ``--train_file data/wiki1m_for_simcse.txt``, ``nli_for_simcse.csv``), for the message that says it is missing:
    the command, the dataset's name, where it saves it and what serves instead offline; ``""`` for any other name."""
    for data_file in DATA_FILES.values():
        if not data_file.extract and Path(path).name == posixpath.basename(data_file.path):
            return (
                f"`python -m hf_cse.download {data_file.name}` fetches it (over the network) into "
                f"{data_file.path} under the current folder. {data_file.without_download}"
            )
    return ""
