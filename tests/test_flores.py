import unicodedata

import pytest

from mindcap_tok.data.flores import load_flores, load_parallel
from mindcap_tok.data.languages import flores_codes, resolve_language
from mindcap_tok.errors import MindcapError


def test_language_aliases():
    assert resolve_language("th") == "tha_Thai"
    assert resolve_language("sw") == "swh_Latn"
    assert resolve_language("de") == "deu_Latn"
    assert resolve_language("EN") == "eng_Latn"
    assert resolve_language("tha_thai") == "tha_Thai"
    assert resolve_language("tha") == "tha_Thai"  # unambiguous ISO 639-3
    assert len(flores_codes()) == 204
    with pytest.raises(MindcapError, match="ambiguous"):
        resolve_language("arb")  # arb_Arab and arb_Latn
    with pytest.raises(MindcapError, match="unknown language 'xx'"):
        resolve_language("xx")


def test_real_splits_have_release_sizes(flores_dir):
    assert len(load_flores("th", "devtest", source=flores_dir)) == 1012
    assert len(load_flores("th", "dev", source=flores_dir)) == 997
    with pytest.raises(MindcapError, match="unknown FLORES split"):
        load_flores("th", "test", source=flores_dir)


def _tiny_flores(root, files):
    for (split, code), lines in files.items():
        folder = root / split
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"{code}.{split}").write_text("".join(ln + "\n" for ln in lines), encoding="utf-8")
    return str(root)


def test_nfc_normalisation(tmp_path):
    nfd = unicodedata.normalize("NFD", "Grüße, café")
    assert nfd != unicodedata.normalize("NFC", nfd)
    src = _tiny_flores(tmp_path, {("devtest", "deu_Latn"): [nfd]})
    assert load_flores("de", "devtest", source=src) == ["Grüße, café"]


def test_misaligned_files_name_file_and_counts(tmp_path):
    src = _tiny_flores(
        tmp_path,
        {("devtest", "eng_Latn"): ["a", "b", "c"], ("devtest", "tha_Thai"): ["ก", "ข"]},
    )
    with pytest.raises(MindcapError) as info:
        load_parallel(["th"], "devtest", source=src)
    msg = str(info.value)
    assert "tha_Thai.devtest" in msg and "has 2 lines" in msg and "has 3" in msg


def test_missing_file_is_named(tmp_path):
    src = _tiny_flores(tmp_path, {("devtest", "eng_Latn"): ["a"]})
    with pytest.raises(MindcapError, match=r"FLORES file missing: .*tha_Thai\.devtest"):
        load_parallel(["th"], "devtest", source=src)
