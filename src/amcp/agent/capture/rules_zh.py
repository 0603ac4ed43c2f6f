"""Chinese R1 rules (credentials are in `credentials.py`).

Chinese has no word boundaries, so each pattern is anchored on 我/我们 directly before the
verb (我喜欢, 我叫, 我住在) or on a sentence-initial imperative (以后都…, 不要…), and a
few famous ambiguities are handled explicitly: 我会 is both "I will" and "I can" (we
require a time word), 我叫了 is "I ordered", 不要紧 is "never mind".
"""

# ruff: noqa: E501 - pattern tables (with double-width CJK) read better unwrapped than split mid-regex
from __future__ import annotations

import re

from amcp.agent.capture.model import Category, Importance, KnowledgeType, Predicate
from amcp.agent.capture.rules import Builder, Extract, Rule
from amcp.agent.capture.text import clip_object, slug, third_person

_DEADLINE = re.compile(
    r"今天|明天|后天|今晚|明早|明晚|下周|下星期|下个月|周[一二三四五六日天末]|星期[一二三四五六日天]|"
    r"礼拜[一二三四五六日天]|月底|年底|\d+\s*[点号日]|[一二三四五六七八九十]+[点号]|之前|[天周号点底]前|"
    r"马上|尽快|稍后|回头|待会|一会儿|晚上|中午|下午|上午|早上|今年|本周|这周"
)
_LIKE_VETO = re.compile(r"^(?:你|他|她|它|这|那|上面|刚才)")
_NEVER_VETO = re.compile(r"^(?:紧|担心|客气|急|着急|怕|害怕|介意|难过|生气|谢|忘|管|说了|的|人|提了)")
_PRE_VETO = re.compile(r"觉得|想|猜|希望|估计|他|她|们|不")
_NAME_VETO = re.compile(r"^(?:了|过|他|她|你|外卖|车|人|醒|起来|住|到|来|好|什么)")
_ROLE_VETO = re.compile(r"^(?:说|觉得|想|不是|在|不|怕|担心)")
_BLOCK_VETO = re.compile(r"^(?:路上|堵车|电梯|门口|半路|高速|地铁|机场)")
_SUBJ_LEAD = re.compile(r"^(?:所以|好消息|坏消息|更新一下|对了|另外|我们|我|团队|已经|终于|刚刚|刚|把|的)+[，,：:\s]*")
_ROLE = (
    r"(?:工程师|程序员|开发者|开发|学生|老师|教师|医生|护士|律师|设计师|经理|科学家|研究员|研究生|博士生|"
    r"本科生|分析师|架构师|作家|教授|创始人|产品经理|运维|测试|会计|记者|编辑|实习生|自由职业者|创业者|"
    r"销售|顾问|主管|总监|CTO|CEO|站长|厨师|素食者|学者)"
)
_PROJ = (
    r"(?:迁移|部署|版本|[vV]\d[\w.]*|上线|发布|功能|模块|接口|测试|数据库|重构|需求|代码|项目|PR|分支|"
    r"服务|前端|后端|文档|里程碑|[Bb]ug|BUG|修复|CI|流水线|构建|编译|集成|升级|方案|设计|原型|[Dd]emo|"
    r"脚本|任务|系统|服务器|集群|网站|[Aa]pp|API|SDK|迭代|冲刺|工单|模型|训练|实验|数据集|索引|缓存)"
)
_STATE = (
    r"(?P<state>完成了|做完了|搞定了|上线了|发布了|合并了|部署好了|部署了|修好了|跑通了|通过了|挂了|"
    r"失败了|出问题了|延期了|暂停了|停了|已完成|已上线|已发布|已合并|已部署|已修复|卡住了|崩了|"
    r"全绿了|写完了|弄好了)"
)
_PROJ_RE = re.compile(_PROJ)
_CLAUSE_START = re.compile(r"[，,；;：:（(。！？!?]")
_CJK_OBJ = r"(?P<obj>.{1,80})"


def _u(text: str) -> str:
    return third_person(text, "zh")


def _like(m: re.Match[str]) -> Extract | None:
    obj = clip_object(m.group("obj"))
    if _LIKE_VETO.match(obj):
        return None
    if m.group("neg"):
        return Extract(f"用户不喜欢{obj}", f"User.Preference.{slug(obj)}", obj,
                       predicate=Predicate.CONFLICTS_WITH)
    return Extract(f"用户喜欢{obj}", f"User.Preference.{slug(obj)}", obj)


def _favourite(m: re.Match[str]) -> Extract | None:
    what, obj = m.group("what"), clip_object(m.group("obj"))
    return Extract(f"用户最喜欢的{what}是{obj}", f"User.Preference.{slug(what)}", obj)


# What a standing instruction is about, between "以后" and "都": "以后回复都用中文" (replies
# from now on in Chinese). A closed list: an open one would take "以后大家都会明白" (everyone
# will understand later) for a rule.
_TOPICS = r"回复|回答|答复|输出|代码|注释|提交信息|提交|文档|说明|消息|对话|交流|格式|命名|变量名|日志"


def _always(m: re.Match[str]) -> Extract | None:
    obj = clip_object(m.group("obj"))
    topic = m.groupdict().get("topic") or ""
    return Extract(f"用户规则：以后{topic}都{_u(obj)}", f"User.Rule.{slug(topic + obj)}", obj,
                   predicate=Predicate.REQUIRES, importance=Importance.CRITICAL,
                   amf_type=KnowledgeType.PRINCIPLE)


def _never(m: re.Match[str]) -> Extract | None:
    obj = clip_object(m.group("obj"))
    if _NEVER_VETO.match(obj):
        return None
    return Extract(f"用户规则：不要{_u(obj)}", f"User.Rule.{slug(obj)}", obj,
                   predicate=Predicate.CONFLICTS_WITH, importance=Importance.CRITICAL,
                   amf_type=KnowledgeType.PRINCIPLE)


def _decided(m: re.Match[str]) -> Extract | None:
    obj = clip_object(m.group("obj")).removesuffix("吧")
    return Extract(f"决定：{_u(obj)}", f"Project.Decision.{slug(obj)}", obj)


def _config(m: re.Match[str]) -> Extract | None:
    attr = _SUBJ_LEAD.sub("", _lookback(m, 20)).strip()
    val = clip_object(m.group("obj")).removesuffix("吧")
    if not attr or attr.startswith(("闹钟", "壁纸", "铃声")):
        return None
    return Extract(f"配置：{attr} = {val}", f"Project.Config.{slug(attr)}", val)


def _will(m: re.Match[str]) -> Extract | None:
    obj = clip_object(m.group("obj"))
    pre = m.group("pre") or ""
    if _PRE_VETO.search(pre):  # "我觉得他明天会来" is an opinion about someone else
        return None
    # 我会 without a time word is ability ("我会说中文"), not a promise.
    if not _DEADLINE.search(pre + obj):
        return None
    return Extract(f"用户{pre}会{_u(obj)}", f"User.Task.{slug(obj)}", obj,
                   importance=Importance.HIGH)


def _remind(m: re.Match[str]) -> Extract | None:
    obj = clip_object(m.group("obj"))
    if obj.startswith(("了", "过")):  # 你提醒我了: it already happened
        return None
    return Extract(f"提醒用户{_u(obj)}", f"User.Task.{slug(obj)}", obj, importance=Importance.HIGH)


def _deadline_task(m: re.Match[str]) -> Extract | None:
    obj = clip_object(m.group("obj"))
    when = m.group("when")
    return Extract(f"用户要在{when}之前{_u(obj)}", f"User.Task.{slug(obj)}", f"{obj}（{when}之前）",
                   importance=Importance.HIGH)


def _identity(attr: str, template: str, veto: re.Pattern[str] | None = None) -> Builder:
    def build(m: re.Match[str]) -> Extract | None:
        obj = clip_object(m.group("obj"))
        if veto is not None and veto.match(obj):
            return None
        return Extract(template.format(obj), f"User.Identity.{attr}", obj)

    return build


def _lookback(m: re.Match[str], chars: int) -> str:
    """The clause before the match, at most `chars` long. Anchoring on the verb and looking
    back is ~20x cheaper than a pattern that opens with an optional subject span."""
    return _CLAUSE_START.split(m.string[: m.start()])[-1][-chars:]


def _state(m: re.Match[str]) -> Extract | None:
    window = _lookback(m, 21)
    if not _PROJ_RE.search(window):
        return None
    subj = _SUBJ_LEAD.sub("", window).strip()
    state = m.group("state")
    blocked = state in {"挂了", "失败了", "出问题了", "延期了", "卡住了", "崩了"}
    return Extract(f"项目状态：{subj}{state}", f"Project.State.{slug(subj)}", f"{subj}{state}",
                   importance=Importance.HIGH if blocked else None)


def _blocked(m: re.Match[str]) -> Extract | None:
    obj = clip_object(m.group("obj"))
    if _BLOCK_VETO.match(obj):
        return None
    return Extract(f"项目状态：卡在{obj}", f"Project.Blocker.{slug(obj)}", obj,
                   predicate=Predicate.REQUIRES, importance=Importance.HIGH)


def _blocked_by(m: re.Match[str]) -> Extract | None:
    by = m.group("by")
    if by:
        return _blocked_text(by)
    return _blocked(m)


def _blocked_text(obj: str) -> Extract | None:
    obj = clip_object(obj)
    return Extract(f"项目状态：被{obj}阻塞", f"Project.Blocker.{slug(obj)}", obj,
                   predicate=Predicate.REQUIRES, importance=Importance.HIGH)


_RULE_LEAD = r"^(?:请|你|还有|另外|记住|注意|以后|今后|从现在起|从今以后|往后|从今天起|[，,\s])*"
_HINTS: dict[str, tuple[str, ...]] = {
    "pref.always": ("以后", "今后", "从现在起", "从今以后", "往后", "从今天起"),
    "pref.always_start": ("总是", "始终", "一律", "每次都", "务必", "一定要", "永远要"),
    "pref.never": ("不要", "别", "不许", "禁止", "不准", "不能再"),
    "pref.favourite": ("最喜欢", "最爱", "偏好"),
    "pref.like": ("喜欢", "偏好", "偏爱", "倾向于", "习惯用", "爱用", "更愿意", "讨厌", "受不了", "反感", "不爱"),
    "pref.label": ("偏好", "习惯"),
    "commit.remind": ("提醒我", "别让我忘了"),
    "commit.deadline": ("前",),
    "commit.will": ("会", "将", "保证", "答应", "承诺", "争取"),
    "decide.decided": ("决定", "商定", "敲定", "选定", "拍板", "确定"),
    "decide.use": ("改用", "换成", "换用", "统一用", "就用", "采用"),
    "decide.use_ba": ("吧",),
    "config.set": ("配置", "设置", "设为", "设成", "改为", "改成", "调到", "调为", "定为"),
    "id.name": ("叫", "名字", "姓"),
    "id.role": ("我是",),
    "id.work": ("工作", "上班", "任职", "实习", "读书", "上学", "读研", "读博"),
    "id.live": ("住在", "居住在", "定居在", "生活在", "常驻"),
    "id.from": ("来自", "老家", "出生在"),
    "id.age": ("岁",),
    "id.contact": ("我的",),
    "state.blocked": ("卡在", "阻塞", "卡住", "挡住"),
    "state.is": ("了", "已"),
}

RULES_ZH: tuple[Rule, ...] = tuple(
    Rule(rid, cat, re.compile(pat), build, _HINTS[rid])
    for rid, cat, pat, build in (
        # preference ------------------------------------------------------------------
        ("pref.always", Category.PREFERENCE, r"(?:以后|今后|从现在起|从今以后|往后|从今天起)[，,\s]*(?:请|你)?"
         r"(?P<topic>(?:" + _TOPICS + r"){1,2})?(?:都|一律|全部|统一|总是|每次都|一直)(?:要|请)?"
         + _CJK_OBJ,
         _always),
        ("pref.always_start", Category.PREFERENCE, _RULE_LEAD + r"(?:总是|始终|一律|每次都要|每次都|务必|"
         r"一定要|永远要)" + _CJK_OBJ, _always),
        ("pref.never", Category.PREFERENCE, _RULE_LEAD + r"(?:永远|千万|绝对|再也|一定)?(?:不要|别再|别|"
         r"不许|禁止|不准|不能再)(?:再)?" + _CJK_OBJ, _never),
        ("pref.favourite", Category.PREFERENCE, r"我(?:最喜欢|最爱|偏好)的(?P<what>[\u4e00-\u9fff\w]{1,8})"
         r"是" + _CJK_OBJ, _favourite),
        ("pref.like", Category.PREFERENCE, r"我(?:很|比较|更|最|特别|非常|一直|还是|真的|也)*"
         r"(?P<neg>不喜欢|讨厌|受不了|反感|不爱)?(?(neg)|(?:喜欢|偏好|偏爱|倾向于|习惯用|爱用|更愿意))"
         + _CJK_OBJ, _like),
        ("pref.label", Category.PREFERENCE, r"我的(?:偏好|习惯)是" + _CJK_OBJ,
         lambda m: Extract(f"用户偏好：{clip_object(m.group('obj'))}", "User.Preference.habit",
                           clip_object(m.group("obj")))),
        # commitment ------------------------------------------------------------------
        ("commit.remind", Category.COMMITMENT, r"(?:记得|请|麻烦|帮我)?(?:提醒我|别让我忘了|别忘了提醒我)"
         + _CJK_OBJ, _remind),
        ("commit.deadline", Category.COMMITMENT, r"(?P<when>今天|明天|后天|今晚|下周[一二三四五六日天]?|"
         r"周[一二三四五六日天]|星期[一二三四五六日天]|月底|\d+号|\d+点)(?:之前|以前|前)我?(?:要|得|会|必须)?"
         r"(?P<obj>(?:把|交|提交|完成|发|给|写|做|修|部署|上线|回复|准备).{1,60})", _deadline_task),
        ("commit.will", Category.COMMITMENT, r"我(?P<pre>[^，。！？,]{0,8}?)(?:会|将|保证|答应|承诺|争取)"
         + _CJK_OBJ, _will),
        # config_decision -------------------------------------------------------------
        ("decide.decided", Category.CONFIG_DECISION, r"(?:我们|咱们|我|团队)?(?:最终|最后|已经)?"
         r"(?<![不没未还])(?:决定|商定|敲定|选定|拍板|确定(?=用|使用|采用|选))(?:了)?(?:就)?" + _CJK_OBJ, _decided),
        ("decide.use", Category.CONFIG_DECISION, r"(?:我们|咱们)?(?:就|统一|以后|还是)?(?:改用|换成|换用|"
         r"统一用|就用|采用)(?P<obj>.{1,60})", _decided),
        ("decide.use_ba", Category.CONFIG_DECISION, r"(?:我们|咱们)(?:就|还是)?(?:用|使用)(?P<obj>.{1,40}?)吧",
         _decided),
        ("config.set", Category.CONFIG_DECISION, r"(?:配置为|配置成|"
         r"设置为|设置成|设为|设成|改为|改成|调到|调为|定为)" + _CJK_OBJ, _config),
        # identity --------------------------------------------------------------------
        ("id.name", Category.IDENTITY, r"(?:我(?:的名字)?叫|我的名字是|(?:你|大家)(?:可以)?叫我|我姓)"
         r"(?P<obj>[\u4e00-\u9fff·]{1,5}|[A-Z][a-z]+(?: [A-Z][a-z]+)?)",
         _identity("name", "用户名叫{}", _NAME_VETO)),
        ("id.role", Category.IDENTITY, r"我是(?:一名|一个|一位|个|名)?(?P<obj>[\w\u4e00-\u9fff]{0,14}?" + _ROLE
         + r")", _identity("role", "用户是{}", _ROLE_VETO)),
        ("id.work", Category.IDENTITY, r"我(?:现在|目前)?在(?P<obj>[\w\u4e00-\u9fff&.-]{2,20}?)"
         r"(?:工作|上班|任职|实习|读书|上学|读研|读博)", _identity("employer", "用户在{}工作")),
        ("id.live", Category.IDENTITY, r"我(?:现在|目前|一直)?(?:住在|居住在|定居在|生活在|常驻)"
         r"(?P<obj>[\u4e00-\u9fffA-Za-z ]{2,15})", _identity("location", "用户住在{}")),
        ("id.from", Category.IDENTITY, r"我(?:来自|老家在|老家是|出生在)(?P<obj>[\u4e00-\u9fffA-Za-z ]{2,15})",
         _identity("origin", "用户来自{}")),
        ("id.age", Category.IDENTITY, r"我今年(?P<obj>\d{1,3}|[一二三四五六七八九十]{1,3})岁",
         _identity("age", "用户今年{}岁")),
        ("id.contact", Category.IDENTITY, r"我的(?P<what>邮箱|电子邮件|手机号|电话|生日|时区|GitHub用户名|用户名)"
         r"(?:是|：|:)(?P<obj>.{2,60})",
         lambda m: Extract(f"用户的{m.group('what')}是{clip_object(m.group('obj'))}",
                           f"User.Identity.{slug(m.group('what'))}", clip_object(m.group("obj")))),
        # project_state ---------------------------------------------------------------
        ("state.blocked", Category.PROJECT_STATE, r"(?:我们|我|团队|项目)?(?:现在|目前|还|一直|又)?"
         r"(?:卡在|被(?P<by>.{1,20}?)(?:阻塞|卡住|挡住)了?)" + r"(?P<obj>.{0,60})",
         _blocked_by),
        ("state.is", Category.PROJECT_STATE, r"(?:已经|都|终于|刚刚|刚|总算|也|又|还是)?" + _STATE, _state),
    )
)

