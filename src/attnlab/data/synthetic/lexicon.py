"""The words of the synthetic corpus (``attnlab.data.synthetic``): source word -> target stem, and the
target language's suffixes and function words. Data, not code: add a word here and the generator uses it.
"""

NOUNS = {
    "cat": "maŭ",
    "dog": "vuf",
    "bird": "pip",
    "horse": "kaval",
    "teacher": "dok",
    "farmer": "agrikult",
    "king": "reĝ",
    "student": "stud",
    "doctor": "kurac",
    "baker": "bak",
    "sailor": "marist",
    "girl": "knabin",
    "boy": "knab",
    "friend": "amik",
    "neighbour": "najbar",
}
PLURALS = {"child": "children", "man": "men", "woman": "women"}
NOUNS.update({"child": "id", "man": "vir", "woman": "virin"})
ADJECTIVES = {
    "big": "gran",
    "small": "pik",
    "red": "ruĝ",
    "old": "maljun",
    "young": "jun",
    "happy": "feliĉ",
    "green": "verd",
    "quick": "rapid",
    "tall": "alt",
    "black": "nigr",
    "clever": "saĝ",
    "tired": "lac",
}
VERBS = {
    "see": "vid",
    "like": "am",
    "chase": "ĉas",
    "help": "help",
    "find": "trov",
    "follow": "sekv",
    "call": "vok",
    "watch": "gard",
    "meet": "renkont",
    "greet": "salut",
}
NUMERALS = {"two": "du", "three": "tri", "four": "kvar", "five": "kvin", "six": "ses"}
PLACES = {
    "garden": "ĝarden",
    "house": "dom",
    "river": "river",
    "city": "urb",
    "forest": "arbar",
    "field": "kamp",
    "market": "merkat",
    "school": "lernej",
}
PREPOSITIONS = {"in": "e", "near": "apud", "behind": "malantaŭ"}
# Case suffixes: (case, plural) -> suffix shared by a noun and its adjectives.
CASE = {("subj", False): "a", ("subj", True): "aj", ("obj", False): "on", ("obj", True): "ojn"}
VERB_AGREEMENT = {False: "es", True: "en"}
DEFINITE, RELATIVE, AND = "ta", "ke", "kaj"
