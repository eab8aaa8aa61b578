"""bertkit dedup on scripts written without spaces: each character is a word, so a near copy
of a Chinese article (two characters changed) is found, an unlike article is kept, and the
scripts with spaces between words keep their words."""

from __future__ import annotations

from pathlib import Path

from pipelines.dedup import normalised_words, signature, similarity
from schemas import Document
from tests.test_dedup import duplicates, kept_ids, run_dedup, write_documents_dir

# Written for this test (270 and 227 characters of text).
ARTICLE = [
    "河流从高山的积雪中出发，先是细小的溪水，在岩石之间跳跃，随后汇成宽阔的江面。",
    "沿岸的村庄依靠它灌溉稻田，渔民在清晨撑船出门，傍晚带着满舱的鱼回来。",
    "春天的洪水常常冲毁堤坝，于是人们学会了在高处建房，并在河边种下柳树来固定泥土。",
    "几百年来，这条河见证了集市的兴起、桥梁的修建和铁路的到来。",
    "今天，城市的工厂沿着下游排开，河水变得浑浊，鱼也越来越少。",
    "一些年轻人回到家乡，组织志愿者清理河床，记录水质的变化，并说服工厂安装过滤设备。",
    "他们在学校里讲解河流的历史，让孩子们知道每一滴水都来自远方的雪山。",
    "十年以后，白鹭重新出现在浅滩上，老人们说，这是他们童年时才见过的景象。",
    "河流没有改变它的方向，改变的是住在岸边的人。",
]
UNLIKE = [
    "图书馆在城市的东边，是一座三层的红砖建筑，门前有两棵高大的银杏树。",
    "每到秋天，金黄的叶子铺满台阶，来借书的人总要停下脚步拍几张照片。",
    "馆里收藏着八万多册图书，其中有不少是当地作家的手稿和早年的报纸。",
    "管理员是一位退休的数学老师，她记得每位常客喜欢读什么，也会悄悄把新到的书留给他们。",
    "周末的下午，孩子们坐在地毯上听故事，大人们在窗边的长桌旁写作或者看杂志。",
    "前几年，图书馆差点因为经费不足而关闭，市民们自发捐款，又请来建筑师修好了漏雨的屋顶。",
    "如今它开放到晚上九点，灯光从高高的窗户里照出来，像一盏守夜的灯。",
]


def with_two_characters_changed(sentences: list[str]) -> list[str]:
    changed = list(sentences)
    changed[2] = changed[2].replace("堤坝", "堤岸")
    changed[6] = changed[6].replace("孩子", "学生")
    assert changed != sentences
    return changed


def test_each_character_of_a_script_without_spaces_is_a_word() -> None:
    assert normalised_words(["模型训练，BERT模型。"]) == [*"模型训练", "bert", *"模型"]
    assert normalised_words(["模型 训练"]) == normalised_words(["模型训练"])
    assert normalised_words(["日本語のテキスト"]) == [*"日本語のテキスト"]
    assert normalised_words(["ไทย ง่าย"]) == ["ไ", "ท", "ย", "ง", "่", "า", "ย"]
    # Scripts with spaces between words keep their words.
    assert normalised_words(["한국어 문장입니다."]) == ["한국어", "문장입니다"]
    assert normalised_words(["Ünïcode naïve café"]) == ["ünïcode", "naïve", "café"]


def test_a_chinese_near_copy_has_a_high_similarity_and_an_unlike_article_a_low_one() -> None:
    def signed(sentences: list[str]) -> bytes:
        words = normalised_words(sentences)
        return signature(words, ngram=5, num_perm=256, seed=42)

    original = signed(ARTICLE)
    assert len(normalised_words(ARTICLE)) == 270
    assert similarity(original, signed(with_two_characters_changed(ARTICLE))) >= 0.9
    assert similarity(original, signed(UNLIKE)) <= 0.05


def test_the_stage_removes_a_chinese_near_copy_and_keeps_the_unlike_article(
    tmp_path: Path,
) -> None:
    def doc(doc_id: str, sentences: list[str]) -> Document:
        return Document(id=doc_id, source="zh", title=doc_id, sentences=tuple(sentences))

    inputs = write_documents_dir(
        tmp_path / "zh",
        [
            [
                doc("zh/river", ARTICLE),
                doc("zh/library", UNLIKE),
                doc("zh/river-edited", with_two_characters_changed(ARTICLE)),
            ]
        ],
    )
    out = tmp_path / "out"
    assert run_dedup(out, inputs) == 0
    assert kept_ids(out) == ["zh/river", "zh/library"]
    rows = duplicates(out)
    assert [(r["id"], r["duplicate_of"], r["kind"]) for r in rows] == [
        ("zh/river-edited", "zh/river", "near_duplicate")
    ]
