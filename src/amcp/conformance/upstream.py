"""The upstream conformance test list (AMCP_v1.0.json ``conformance``), verbatim.

Copied rather than read at run time because the kit ships inside the package and the
upstream JSON does not; tests/conformance/test_upstream_list.py checks the copy against
the file whenever the spec checkout is present. Upstream: Apache-2.0, StepMind Community.
"""

from __future__ import annotations

LEVEL_DESCRIPTIONS: dict[int, str] = {
    1: "基础一致性 — 可以参与AMCP网络",
    2: "标准一致性 — 可以参与生产环境",
    3: "高级一致性 — 可以作为基础设施节点",
}

UPSTREAM_TESTS: dict[int, tuple[str, ...]] = {
    1: (
        "T1-01: 帧格式验证 — 发送的所有帧MUST包含正确的MAGIC值",
        "T1-02: 能力声明 — 连接时MUST发送CAPABILITY_HELLO",
        "T1-03: 协议违规处理 — 收到非法帧时MUST返回0x00FF并断开",
        "T1-04: AMF格式验证 — 所有写入的知识MUST通过AMF schema验证",
        "T1-05: 知识不可变 — 实现MUST拒绝直接修改已有知识的请求",
        "T1-06: 状态机 — 非法状态转换MUST被拒绝",
        "T1-07: Checksum验证 — 帧checksum不匹配时MUST静默丢弃",
        "T1-08: 内容寻址 — knowledge_id计算MUST符合SHA-256规范",
    ),
    2: (
        "T2-01: 冷启动流程 — CSE MUST在100ms内完成上下文组装",
        "T2-02: AMQL核心 — MUST支持semantic_match, type过滤, confidence过滤",
        "T2-03: 分层存储 — MUST实现tier_0端侧存储和本地索引",
        "T2-04: 幂等写入 — 相同knowledge_id写入N次的结果与写入1次相同",
        "T2-05: 知识衰减 — KT-CONTEXT知识MUST在超过half_life后降低confidence",
        "T2-06: QEF信号 — MUST能发送和接收KT-SIGNAL类型知识",
        "T2-07: 因果时钟 — MUST正确维护HLC并在帧头携带",
        "T2-08: 跨厂商互操作 — 与参考实现的互操作测试",
    ),
    3: (
        "T3-01: 分布式同步 — Gossip协议在60秒内达到95%节点收敛",
        "T3-02: 冲突解决 — 并发写入冲突时按因果链长度正确解决",
        "T3-03: 知识引力 — cluster化后相关知识MUST优先被同时加载",
        "T3-04: 端侧固化规则 — KT-FACT/KT-PITFALL MUST被固化且MUST NOT被驱逐",
        "T3-05: 知识提炼 — KDE从session历史提炼的原则MUST通过语义一致性测试",
        "T3-06: 联邦同步 — 跨组织知识同步保持物理/逻辑/语义三层一致性",
    ),
}


def split(line: str) -> tuple[str, str]:
    """``"T2-04: 幂等写入 — …"`` → ``("T2-04", "幂等写入 — …")``."""
    test_id, _, text = line.partition(": ")
    return test_id, text
