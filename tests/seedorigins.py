"""The public origin of each seed (../shared/seeds/README.md): what rules/ and kb/ cite instead of
the seed file names, which only tests that map seed facts to rules may keep."""

ORIGINS = {
    "000_43af7a7a7fac43b8.txt": ("https://github.com/Oneflow-Inc/libai/blob/main/docs/source/notes/FAQ.md",),
    "001_17b131665143d0d2.txt": ("https://github.com/facebookresearch/metaseq/tree/main/projects/OPT/chronicles",
                                 "https://arxiv.org/abs/2205.01068"),
    "002_2969b0ea5896ed69.txt": ("https://github.com/bigscience-workshop/bigscience/blob/master/train/tr8-104B-wide/chronicles.md",),
    "003_10afe1a0742d2c2f.txt": ("https://github.com/liguodongiot/llm-action", "https://github.com/TencentARC/LLaMA-Pro",
                                 "https://github.com/Ablustrund/LoRAMoE", "https://github.com/THUDM/ChatGLM2-6B/issues/270",
                                 "https://github.com/hiyouga/LLaMA-Factory/issues/1347", "https://arxiv.org/abs/2206.02369",
                                 "https://zhuanlan.zhihu.com/p/651588659", "https://zhuanlan.zhihu.com/p/659961396"),
    "004_39428b208c12ba79.txt": ("https://github.com/bigscience-workshop/bigscience/blob/master/train/lessons-learned.md",),
}


def cites(seed: str, text: str) -> bool:
    """Does ``text`` (a source string or a whole file) cite the public origin of ``seed``?"""
    return any(origin in text for origin in ORIGINS[seed])
