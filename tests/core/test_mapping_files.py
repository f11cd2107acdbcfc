"""Reading rule files: msprobe's real mapping files, every format, and bad input naming file and line."""

from __future__ import annotations

import pytest

from graphcmp.core.errors import MappingError
from graphcmp.core.mapping_files import (
    BUILTIN_MS_TO_PT_API,
    BUILTIN_MS_TO_PT_PARAMS,
    load_api_mapping,
    load_builtin,
    load_cell_mapping,
    load_data_mapping,
    load_layer_mapping,
    load_manual_file,
    load_me_mapping,
    load_op_table,
)
from tests.conftest import DATA

FILES = DATA / "mapping_files"


def test_layer_mapping_of_msprobe_keeps_classes_dotted_keys_and_lines():
    rules = load_layer_mapping(FILES / "msprobe_layer_mapping.yaml")
    texts = {e.text: e.where.rsplit(":", 1)[1] for e in rules.entries}
    assert texts == {
        "TopLayer: network_with_loss -> module": "2",
        "VocabParallelEmbedding: logical_or -> __or__": "5",
        "VocabParallelEmbedding: reduce_from_mp_region.all_reduce -> all_reduce": "6",
        "ParallelTransformerLayer: attention -> self_attention": "9",
        "ParallelAttention: flash_attention_score -> core_attention_flash.npu_fusion_attention": "12",
        "FusedRMSNorm: RmsNorm -> npu_rms_norm": "15",
    }


def test_gpt_mapping_file_and_legacy_cell_top_key(tmp_path):
    rules = load_layer_mapping(DATA / "msprobe_gpt_mapping" / "mapping.yaml")
    assert [(e.scope, e.key, e.value) for e in rules.entries][:2] == [("TopLayer", "blocks", "layers"),
                                                                      ("TargetBlock", "input_norm", "ln1")]
    legacy = tmp_path / "legacy.yaml"
    legacy.write_text("Cell:\n  net: module(something)\n")
    assert [(e.scope, e.value) for e in load_layer_mapping(legacy).entries] == [("TopLayer", "module")]


def test_cell_data_and_builtin_tables():
    cells = load_cell_mapping(FILES / "msprobe_cell_mapping.yaml")
    assert [(e.key, e.value) for e in cells.entries] == [("fc1.Dense", "fc1.Linear"), ("conv1.Conv2d", "conv3.Conv2d")]
    data = load_data_mapping(FILES / "msprobe_data_mapping.yaml")
    assert data.entries[0].value == "Function.attention.4.forward.input.0"
    api = load_builtin(BUILTIN_MS_TO_PT_API)
    assert len(api.entries) == 399 and api.builtin and api.ms_to_pt  # msprobe's table, verbatim
    assert ("Functional.matmul", "Torch.matmul") in {(e.key, e.value) for e in api.entries}
    params = {(e.scope, e.key): e.value for e in load_builtin(BUILTIN_MS_TO_PT_PARAMS).entries}
    assert params[("LayerNorm", "gamma")] == "weight" and params[("Embedding", "embedding_table")] == "weight"


def test_api_mapping_list_with_argument_positions(tmp_path):
    path = tmp_path / "am.yaml"
    path.write_text("- ms_api: Functional.flash_attention_score\n  pt_api: NPU.npu_fusion_attention\n"
                    "  ms_args: [0, 1, 2]\n  pt_args: [0, 1, 2]\n  ms_outputs: [0]\n  pt_outputs: [0]\n")
    rules = load_api_mapping(path)
    assert rules.ms_to_pt and rules.entries[0].extra == (("args", ("0", "1", "2"), ("0", "1", "2")),
                                                         ("outputs", ("0",), ("0",)))
    path.write_text("ms_api: Functional.dense\npt_api: Functional.linear\nms_args: [0, 1]\npt_args: [0]\n")
    with pytest.raises(MappingError, match=r"am\.yaml:1: ms_args has 2 entries but pt_args has 1"):
        load_api_mapping(path)
    path.write_text("- pt_api: Functional.linear\n")
    with pytest.raises(MappingError, match=r"am\.yaml:1: API mapping entry has no 'ms_api'"):
        load_api_mapping(path)


def test_op_table_in_json_yaml_and_csv(tmp_path):
    # get_op_map's documented (ir_map, param_map), as JSON
    (tmp_path / "ops.json").write_text(
        '[{"CudnnBatchNormBackward": "NativeBatchNormBackward",\n'
        '  "CudnnConvolutionBackward": "NpuConvolutionBackward"},\n'
        ' {"CudnnBatchNormBackward": {"epsilon": "eps"},\n  "NpuConvolutionBackward": {"input": "self"}}]\n')
    ops, params = load_op_table(tmp_path / "ops.json")
    assert [(e.key, e.value, e.where.rsplit(":", 1)[1]) for e in ops.entries] == [
        ("CudnnBatchNormBackward", "NativeBatchNormBackward", "1"),
        ("CudnnConvolutionBackward", "NpuConvolutionBackward", "2")]
    assert [(e.scope, e.key, e.value) for e in params.entries] == [("CudnnBatchNormBackward", "epsilon", "eps"),
                                                                   ("NpuConvolutionBackward", "input", "self")]
    (tmp_path / "ops.yaml").write_text("ops:\n  NpuConvolutionBackward: CudnnConvolutionBackward\nparams:\n"
                                       "  NpuConvolutionBackward: {input: self}\n")
    ops, params = load_op_table(tmp_path / "ops.yaml")
    assert len(ops.entries) == len(params.entries) == 1
    (tmp_path / "ops.csv").write_text("npu,bench,op\nNpuConvolutionBackward,CudnnConvolutionBackward\n"
                                      "epsilon,eps,CudnnBatchNormBackward\n")
    ops, params = load_op_table(tmp_path / "ops.csv")
    assert ops.entries[0].where.endswith("ops.csv:2") and params.entries[0].scope == "CudnnBatchNormBackward"


def test_model_explorer_mapping_with_entries(tmp_path):
    path = tmp_path / "me.json"
    path.write_text('{\n  "mapping": {"a": "b"},\n  "mappingEntries": [\n'
                    '    {"leftNodeIds": ["c"], "rightNodeIds": ["d", "e"]}\n  ]\n}\n')
    rules = load_me_mapping(path)
    assert [(e.key, e.value, e.where.rsplit(":", 1)[1]) for e in rules.entries] == [("a", "b", "2"),
                                                                                  ("c", ("d", "e"), "4")]


@pytest.mark.parametrize(("name", "text", "message"), [
    ("m.yaml", "TopLayer:\n  blocks: [layers\n", r"m\.yaml:3: not valid YAML"),
    ("m.yaml", "- a\n- b\n", r"m\.yaml:1: expected a mapping of layer class names"),
    ("m.yaml", "TopLayer:\n  blocks: [a, b]\n", r"m\.yaml:2: expected the bench name of 'blocks', found a list"),
    ("m.json", '{"TopLayer": {"blocks": "layers",}}', r"m\.json:1: not valid JSON"),
])
def test_malformed_layer_mapping_names_file_and_line(tmp_path, name, text, message):
    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(MappingError, match=message):
        load_layer_mapping(path)


def test_malformed_csv_and_missing_file(tmp_path):
    path = tmp_path / "t.csv"
    path.write_text('npu,bench\nA,B\n"C,D\n')
    with pytest.raises(MappingError, match=r"t\.csv:\d+: not valid CSV"):
        load_op_table(path)
    path.write_text("npu,bench\nA,B,C,D\n")
    with pytest.raises(MappingError, match=r"t\.csv:2: expected 'npu,bench' or 'npu,bench,op', found 4 columns"):
        load_op_table(path)
    with pytest.raises(MappingError, match=r"nope\.yaml: no such mapping file"):
        load_layer_mapping(tmp_path / "nope.yaml")


def test_a_yaml_key_twice_is_refused(tmp_path):
    path = tmp_path / "m.yaml"
    text = (DATA / "msprobe_gpt_mapping" / "mapping.yaml").read_text()
    path.write_text(text + "  dense_h_to_4h: fc2\n")  # YAML allows a key once per mapping
    with pytest.raises(MappingError, match=r"m\.yaml:14: 'dense_h_to_4h' is a key twice in one mapping "
                                           r"\(lines 12 and 14\)"):
        load_layer_mapping(path)
    path.write_text(text + "TopLayer:\n  x: y\n")
    with pytest.raises(MappingError, match=r"m\.yaml:14: 'TopLayer' is a key twice in one mapping \(lines 4 and 14"):
        load_layer_mapping(path)


def test_repeated_keys_of_json_are_listed_and_the_first_wins(tmp_path):
    path = tmp_path / "m.json"  # JSON allows a key twice: the first is used, and the repeat is said
    path.write_text('{"FeedForward": {"dense_h_to_4h": "fc1",\n "dense_h_to_4h": "fc2"}}')
    rules = load_layer_mapping(path)
    assert [e.value for e in rules.entries if e.key == "dense_h_to_4h"] == ["fc1"]
    assert rules.conflicts == (f"{path}:2: FeedForward: child 'dense_h_to_4h' repeats line 1; "
                               "the first one (line 1) is used",)


def test_manual_file_errors_name_the_line(tmp_path):
    path = tmp_path / "cmp.matches.json"
    path.write_text('{"format": "graphcmp.matches", "version": 1,\n "matches": [\n  {"npu": "a"}\n ]}\n')
    with pytest.raises(MappingError, match=r"cmp\.matches\.json:3: a match needs both 'npu' and 'bench'"):
        load_manual_file(path)
    path.write_text('{"format": "msprobe", "version": 1}')
    with pytest.raises(MappingError, match="not a graphcmp manual-matches file"):
        load_manual_file(path)


def test_yaml_aliases_are_refused_before_they_expand(tmp_path):
    lines = ["a: &a [x, y, z, w, v, u, t, s, r]"]
    lines += [f"{n}: &{n} [" + ", ".join([f"*{p}"] * 9) + "]" for p, n in zip("abcdefgh", "bcdefghi")]
    bomb = tmp_path / "bomb.yaml"
    bomb.write_text("\n".join(lines) + "\n")  # 9^9 names once expanded
    with pytest.raises(MappingError, match=r"bomb\.yaml:1: uses a YAML alias"):
        load_layer_mapping(bomb)
    loop = tmp_path / "loop.yaml"
    loop.write_text("Block: &a {x: *a}\n")
    with pytest.raises(MappingError, match=r"loop\.yaml:1: uses a YAML alias"):
        load_layer_mapping(loop)


@pytest.mark.parametrize("name, text", [("deep.yaml", "[" * 2000 + "]" * 2000),
                                        ("deep.json", "[" * 900 + "]" * 900)])
def test_deep_nesting_is_one_line(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(MappingError, match=f"{name}.*nested too deeply"):
        load_layer_mapping(path)


def test_a_fifo_is_never_read_as_a_mapping_file(tmp_path):
    import os

    os.mkfifo(tmp_path / "m.yaml")
    with pytest.raises(MappingError, match=r"m\.yaml: is a FIFO"):
        load_layer_mapping(tmp_path / "m.yaml")
