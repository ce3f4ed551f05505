"""Lucene's ``StandardTokenizer`` (UAX#29 word breaks) as a pure-Python regex scan.

Lucene builds the tokenizer with JFlex 1.8.2 from ``StandardTokenizerImpl.jflex`` (``%unicode 12.1``
since LUCENE-10243, Lucene 9.0; emoji rules from UTS#51 for Unicode 12), unchanged through the Lucene
9.11 / 10.x that Elasticsearch 8.15+ / 9.x run.  Rather than trusting whatever Unicode version the
installed ``regex`` package ships (newer, and it changes between releases), ``_CLASSES`` below is
Lucene's own character-class map: every code point whose class is not 0 in
``StandardTokenizerImpl.zzCMap`` (dumped from lucene-core 9.9.1), grouped by the grammar macro it
feeds.  Code points not listed (class 0) never start or join a token.

JFlex picks the longest match over all rules; the patterns below are written so that a leftmost,
greedy regex match is that longest match (glue is consumed only together with what it glues to).
Checked against lucene-core 9.9.1 on every listed code point in 13 contexts and on 300k random
strings: identical, except for lone surrogates with ``max_token_length`` < 10 (zzRefill quirks).
"""

from __future__ import annotations

import functools
import re

import regex

# Lucene StandardTokenizerImpl character classes (hex code point ranges), see module docstring.  Names:
# the WB property (DQ/SQ = Double/Single_Quote, LETTER = ALetter that is neither Hangul nor emoji,
# NUMERIC = Numeric minus ASCII DIGIT, EXTEND = Extend|Format minus the classes split off below),
# SEA(_EXTEND) = LB:Complex_Context (and Extend), EMOJI = EmojiChar, LETTER_EMOJI = ALetter & Emoji,
# KEYCAP_BASE_SYM = [#*], KEYCAP = U+20E3, VS15/VS16 = U+FE0E/F, RI = Regional_Indicator.
_CLASSES: dict[str, str] = {
    "DQ": ("22 "),
    "KEYCAP_BASE_SYM": ("23 2A "),
    "SQ": ("27 "),
    "MIDNUM": ("2C 3B 37E 589 60C-60D 66C 7F8 2044 FE10 FE14 FE50 FE54 FF0C FF1B "),
    "MIDNUMLET": ("2E 2018-2019 2024 FE52 FF07 FF0E "),
    "DIGIT": ("30-39 "),
    "MIDLETTER": ("3A B7 387 5F4 2027 FE13 FE55 FF1A "),
    "LETTER": (
        "41-5A 61-7A AA B5 BA C0-D6 D8-F6 F8-2D7 2DE-2E4 2EC-2FF 370-374 376-377 37A-37D 37F 386 388-38A "
        "38C 38E-3A1 3A3-3F5 3F7-481 48A-52F 531-556 559 55B-55C 55E 560-588 5F3 620-64A 66E-66F 671-6D3 "
        "6D5 6E5-6E6 6EE-6EF 6FA-6FC 6FF 710 712-72F 74D-7A5 7B1 7CA-7EA 7F4-7F5 7FA 800-815 81A 824 828 "
        "840-858 860-86A 8A0-8B4 8B6-8BD 904-939 93D 950 958-961 971-980 985-98C 98F-990 993-9A8 9AA-9B0 "
        "9B2 9B6-9B9 9BD 9CE 9DC-9DD 9DF-9E1 9F0-9F1 9FC A05-A0A A0F-A10 A13-A28 A2A-A30 A32-A33 A35-A36 "
        "A38-A39 A59-A5C A5E A72-A74 A85-A8D A8F-A91 A93-AA8 AAA-AB0 AB2-AB3 AB5-AB9 ABD AD0 AE0-AE1 AF9 "
        "B05-B0C B0F-B10 B13-B28 B2A-B30 B32-B33 B35-B39 B3D B5C-B5D B5F-B61 B71 B83 B85-B8A B8E-B90 "
        "B92-B95 B99-B9A B9C B9E-B9F BA3-BA4 BA8-BAA BAE-BB9 BD0 C05-C0C C0E-C10 C12-C28 C2A-C39 C3D "
        "C58-C5A C60-C61 C80 C85-C8C C8E-C90 C92-CA8 CAA-CB3 CB5-CB9 CBD CDE CE0-CE1 CF1-CF2 D05-D0C "
        "D0E-D10 D12-D3A D3D D4E D54-D56 D5F-D61 D7A-D7F D85-D96 D9A-DB1 DB3-DBB DBD DC0-DC6 F00 F40-F47 "
        "F49-F6C F88-F8C 10A0-10C5 10C7 10CD 10D0-10FA 10FC-10FF 1200-1248 124A-124D 1250-1256 1258 "
        "125A-125D 1260-1288 128A-128D 1290-12B0 12B2-12B5 12B8-12BE 12C0 12C2-12C5 12C8-12D6 12D8-1310 "
        "1312-1315 1318-135A 1380-138F 13A0-13F5 13F8-13FD 1401-166C 166F-167F 1681-169A 16A0-16EA "
        "16EE-16F8 1700-170C 170E-1711 1720-1731 1740-1751 1760-176C 176E-1770 1820-1878 1880-1884 "
        "1887-18A8 18AA 18B0-18F5 1900-191E 1A00-1A16 1B05-1B33 1B45-1B4B 1B83-1BA0 1BAE-1BAF 1BBA-1BE5 "
        "1C00-1C23 1C4D-1C4F 1C5A-1C7D 1C80-1C88 1C90-1CBA 1CBD-1CBF 1CE9-1CEC 1CEE-1CF3 1CF5-1CF6 1CFA "
        "1D00-1DBF 1E00-1F15 1F18-1F1D 1F20-1F45 1F48-1F4D 1F50-1F57 1F59 1F5B 1F5D 1F5F-1F7D 1F80-1FB4 "
        "1FB6-1FBC 1FBE 1FC2-1FC4 1FC6-1FCC 1FD0-1FD3 1FD6-1FDB 1FE0-1FEC 1FF2-1FF4 1FF6-1FFC 2071 207F "
        "2090-209C 2102 2107 210A-2113 2115 2119-211D 2124 2126 2128 212A-212D 212F-2138 213C-213F "
        "2145-2149 214E 2160-2188 24B6-24C1 24C3-24E9 2C00-2C2E 2C30-2C5E 2C60-2CE4 2CEB-2CEE 2CF2-2CF3 "
        "2D00-2D25 2D27 2D2D 2D30-2D67 2D6F 2D80-2D96 2DA0-2DA6 2DA8-2DAE 2DB0-2DB6 2DB8-2DBE 2DC0-2DC6 "
        "2DC8-2DCE 2DD0-2DD6 2DD8-2DDE 2E2F 3005 303B-303C 3105-312F 31A0-31BA A000-A48C A4D0-A4FD "
        "A500-A60C A610-A61F A62A-A62B A640-A66E A67F-A69D A6A0-A6EF A717-A7BF A7C2-A7C6 A7F7-A801 "
        "A803-A805 A807-A80A A80C-A822 A840-A873 A882-A8B3 A8F2-A8F7 A8FB A8FD-A8FE A90A-A925 A930-A946 "
        "A984-A9B2 A9CF AA00-AA28 AA40-AA42 AA44-AA4B AAE0-AAEA AAF2-AAF4 AB01-AB06 AB09-AB0E AB11-AB16 "
        "AB20-AB26 AB28-AB2E AB30-AB67 AB70-ABE2 FB00-FB06 FB13-FB17 FB50-FBB1 FBD3-FD3D FD50-FD8F "
        "FD92-FDC7 FDF0-FDFB FE70-FE74 FE76-FEFC FF21-FF3A FF41-FF5A 10000-1000B 1000D-10026 10028-1003A "
        "1003C-1003D 1003F-1004D 10050-1005D 10080-100FA 10140-10174 10280-1029C 102A0-102D0 10300-1031F "
        "1032D-1034A 10350-10375 10380-1039D 103A0-103C3 103C8-103CF 103D1-103D5 10400-1049D 104B0-104D3 "
        "104D8-104FB 10500-10527 10530-10563 10600-10736 10740-10755 10760-10767 10800-10805 10808 "
        "1080A-10835 10837-10838 1083C 1083F-10855 10860-10876 10880-1089E 108E0-108F2 108F4-108F5 "
        "10900-10915 10920-10939 10980-109B7 109BE-109BF 10A00 10A10-10A13 10A15-10A17 10A19-10A35 "
        "10A60-10A7C 10A80-10A9C 10AC0-10AC7 10AC9-10AE4 10B00-10B35 10B40-10B55 10B60-10B72 10B80-10B91 "
        "10C00-10C48 10C80-10CB2 10CC0-10CF2 10D00-10D23 10F00-10F1C 10F27 10F30-10F45 10FE0-10FF6 "
        "11003-11037 11083-110AF 110D0-110E8 11103-11126 11144 11150-11172 11176 11183-111B2 111C1-111C4 "
        "111DA 111DC 11200-11211 11213-1122B 11280-11286 11288 1128A-1128D 1128F-1129D 1129F-112A8 "
        "112B0-112DE 11305-1130C 1130F-11310 11313-11328 1132A-11330 11332-11333 11335-11339 1133D 11350 "
        "1135D-11361 11400-11434 11447-1144A 1145F 11480-114AF 114C4-114C5 114C7 11580-115AE 115D8-115DB "
        "11600-1162F 11644 11680-116AA 116B8 11800-1182B 118A0-118DF 118FF 119A0-119A7 119AA-119D0 119E1 "
        "119E3 11A00 11A0B-11A32 11A3A 11A50 11A5C-11A89 11A9D 11AC0-11AF8 11C00-11C08 11C0A-11C2E 11C40 "
        "11C72-11C8F 11D00-11D06 11D08-11D09 11D0B-11D30 11D46 11D60-11D65 11D67-11D68 11D6A-11D89 11D98 "
        "11EE0-11EF2 12000-12399 12400-1246E 12480-12543 13000-1342E 14400-14646 16800-16A38 16A40-16A5E "
        "16AD0-16AED 16B00-16B2F 16B40-16B43 16B63-16B77 16B7D-16B8F 16E40-16E7F 16F00-16F4A 16F50 "
        "16F93-16F9F 16FE0-16FE1 16FE3 1BC00-1BC6A 1BC70-1BC7C 1BC80-1BC88 1BC90-1BC99 1D400-1D454 "
        "1D456-1D49C 1D49E-1D49F 1D4A2 1D4A5-1D4A6 1D4A9-1D4AC 1D4AE-1D4B9 1D4BB 1D4BD-1D4C3 1D4C5-1D505 "
        "1D507-1D50A 1D50D-1D514 1D516-1D51C 1D51E-1D539 1D53B-1D53E 1D540-1D544 1D546 1D54A-1D550 "
        "1D552-1D6A5 1D6A8-1D6C0 1D6C2-1D6DA 1D6DC-1D6FA 1D6FC-1D714 1D716-1D734 1D736-1D74E 1D750-1D76E "
        "1D770-1D788 1D78A-1D7A8 1D7AA-1D7C2 1D7C4-1D7CB 1E100-1E12C 1E137-1E13D 1E14E 1E2C0-1E2EB "
        "1E800-1E8C4 1E900-1E943 1E94B 1EE00-1EE03 1EE05-1EE1F 1EE21-1EE22 1EE24 1EE27 1EE29-1EE32 "
        "1EE34-1EE37 1EE39 1EE3B 1EE42 1EE47 1EE49 1EE4B 1EE4D-1EE4F 1EE51-1EE52 1EE54 1EE57 1EE59 1EE5B "
        "1EE5D 1EE5F 1EE61-1EE62 1EE64 1EE67-1EE6A 1EE6C-1EE72 1EE74-1EE77 1EE79-1EE7C 1EE7E 1EE80-1EE89 "
        "1EE8B-1EE9B 1EEA1-1EEA3 1EEA5-1EEA9 1EEAB-1EEBB 1F130-1F149 1F150-1F169 1F172-1F17D 1F180-1F189 "
    ),
    "EXTENDNUMLET": ("5F 202F 203F-2040 2054 FE33-FE34 FE4D-FE4F FF3F "),
    "EMOJI": (
        "A9 AE 203C 2049 2122 2194-2199 21A9-21AA 231A-231B 2328 2388 23CF 23E9-23F3 23F8-23FA 25AA-25AB "
        "25B6 25C0 25FB-25FE 2600-2605 2607-2612 2614-2685 2690-2705 2708-2712 2714 2716 271D 2721 2728 "
        "2733-2734 2744 2747 274C 274E 2753-2755 2757 2763-2767 2795-2797 27A1 27B0 27BF 2934-2935 "
        "2B05-2B07 2B1B-2B1C 2B50 2B55 3030 303D 3297 3299 1F000-1F0FF 1F10D-1F10F 1F12F 1F16C-1F16F "
        "1F18E 1F191-1F19A 1F1AD-1F1E5 1F201-1F20F 1F21A 1F22F 1F232-1F23A 1F23C-1F23F 1F249-1F3FA "
        "1F400-1F53D 1F546-1F64F 1F680-1F6FF 1F774-1F77F 1F7D5-1F7FF 1F80C-1F80F 1F848-1F84F 1F85A-1F85F "
        "1F888-1F88F 1F8AE-1F8FF 1F90C-1F93A 1F93C-1F945 1F947-1FFFD "
    ),
    "EXTEND": (
        "AD 300-36F 483-489 591-5BD 5BF 5C1-5C2 5C4-5C5 5C7 600-605 610-61A 61C 64B-65F 670 6D6-6DD "
        "6DF-6E4 6E7-6E8 6EA-6ED 70F 711 730-74A 7A6-7B0 7EB-7F3 7FD 816-819 81B-823 825-827 829-82D "
        "859-85B 8D3-903 93A-93C 93E-94F 951-957 962-963 981-983 9BC 9BE-9C4 9C7-9C8 9CB-9CD 9D7 9E2-9E3 "
        "9FE A01-A03 A3C A3E-A42 A47-A48 A4B-A4D A51 A70-A71 A75 A81-A83 ABC ABE-AC5 AC7-AC9 ACB-ACD "
        "AE2-AE3 AFA-AFF B01-B03 B3C B3E-B44 B47-B48 B4B-B4D B56-B57 B62-B63 B82 BBE-BC2 BC6-BC8 BCA-BCD "
        "BD7 C00-C04 C3E-C44 C46-C48 C4A-C4D C55-C56 C62-C63 C81-C83 CBC CBE-CC4 CC6-CC8 CCA-CCD CD5-CD6 "
        "CE2-CE3 D00-D03 D3B-D3C D3E-D44 D46-D48 D4A-D4D D57 D62-D63 D82-D83 DCA DCF-DD4 DD6 DD8-DDF "
        "DF2-DF3 F18-F19 F35 F37 F39 F3E-F3F F71-F84 F86-F87 F8D-F97 F99-FBC FC6 135D-135F 1712-1714 "
        "1732-1734 1752-1753 1772-1773 180B-180E 1885-1886 18A9 1920-192B 1930-193B 1A17-1A1B 1A7F "
        "1AB0-1ABE 1B00-1B04 1B34-1B44 1B6B-1B73 1B80-1B82 1BA1-1BAD 1BE6-1BF3 1C24-1C37 1CD0-1CD2 "
        "1CD4-1CE8 1CED 1CF4 1CF7-1CF9 1DC0-1DF9 1DFB-1DFF 200C 200E-200F 202A-202E 2060-2064 2066-206F "
        "20D0-20E2 20E4-20F0 2CEF-2CF1 2D7F 2DE0-2DFF 302A-302F 3099-309A A66F-A672 A674-A67D A69E-A69F "
        "A6F0-A6F1 A802 A806 A80B A823-A827 A880-A881 A8B4-A8C5 A8E0-A8F1 A8FF A926-A92D A947-A953 "
        "A980-A983 A9B3-A9C0 AA29-AA36 AA43 AA4C-AA4D AAEB-AAEF AAF5-AAF6 ABE3-ABEA ABEC-ABED FB1E "
        "FE00-FE0D FE20-FE2F FEFF FF9E-FF9F FFF9-FFFB 101FD 102E0 10376-1037A 10A01-10A03 10A05-10A06 "
        "10A0C-10A0F 10A38-10A3A 10A3F 10AE5-10AE6 10D24-10D27 10F46-10F50 11000-11002 11038-11046 "
        "1107F-11082 110B0-110BA 110BD 110CD 11100-11102 11127-11134 11145-11146 11173 11180-11182 "
        "111B3-111C0 111C9-111CC 1122C-11237 1123E 112DF-112EA 11300-11303 1133B-1133C 1133E-11344 "
        "11347-11348 1134B-1134D 11357 11362-11363 11366-1136C 11370-11374 11435-11446 1145E 114B0-114C3 "
        "115AF-115B5 115B8-115C0 115DC-115DD 11630-11640 116AB-116B7 1182C-1183A 119D1-119D7 119DA-119E0 "
        "119E4 11A01-11A0A 11A33-11A39 11A3B-11A3E 11A47 11A51-11A5B 11A8A-11A99 11C2F-11C36 11C38-11C3F "
        "11C92-11CA7 11CA9-11CB6 11D31-11D36 11D3A 11D3C-11D3D 11D3F-11D45 11D47 11D8A-11D8E 11D90-11D91 "
        "11D93-11D97 11EF3-11EF6 13430-13438 16AF0-16AF4 16B30-16B36 16F4F 16F51-16F87 16F8F-16F92 "
        "1BC9D-1BC9E 1BCA0-1BCA3 1D165-1D169 1D16D-1D182 1D185-1D18B 1D1AA-1D1AD 1D242-1D244 1DA00-1DA36 "
        "1DA3B-1DA6C 1DA75 1DA84 1DA9B-1DA9F 1DAA1-1DAAF 1E000-1E006 1E008-1E018 1E01B-1E021 1E023-1E024 "
        "1E026-1E02A 1E130-1E136 1E2EC-1E2EF 1E8D0-1E8D6 1E944-1E94A E0001 E0100-E01EF "
    ),
    "HEBREW": ("5D0-5EA 5EF-5F2 FB1D FB1F-FB28 FB2A-FB36 FB38-FB3C FB3E FB40-FB41 FB43-FB44 FB46-FB4F "),
    "NUMERIC": (
        "660-669 66B 6F0-6F9 7C0-7C9 966-96F 9E6-9EF A66-A6F AE6-AEF B66-B6F BE6-BEF C66-C6F CE6-CEF "
        "D66-D6F DE6-DEF E50-E59 ED0-ED9 F20-F29 1040-1049 1090-1099 17E0-17E9 1810-1819 1946-194F "
        "19D0-19D9 1A80-1A89 1A90-1A99 1B50-1B59 1BB0-1BB9 1C40-1C49 1C50-1C59 A620-A629 A8D0-A8D9 "
        "A900-A909 A9D0-A9D9 A9F0-A9F9 AA50-AA59 ABF0-ABF9 FF10-FF19 104A0-104A9 10D30-10D39 11066-1106F "
        "110F0-110F9 11136-1113F 111D0-111D9 112F0-112F9 11450-11459 114D0-114D9 11650-11659 116C0-116C9 "
        "11730-11739 118E0-118E9 11C50-11C59 11D50-11D59 11DA0-11DA9 16A60-16A69 16B50-16B59 1D7CE-1D7FF "
        "1E140-1E149 1E2F0-1E2F9 1E950-1E959 "
    ),
    "SEA": (
        "E01-E30 E32-E33 E40-E46 E81-E82 E84 E86-E8A E8C-EA3 EA5 EA7-EB0 EB2-EB3 EBD EC0-EC4 EC6 EDC-EDF "
        "1000-102A 103F 1050-1055 105A-105D 1061 1065-1066 106E-1070 1075-1081 108E 109E-109F 1780-17B3 "
        "17D7 17DC 1950-196D 1970-1974 1980-19AB 19B0-19C9 19DA 19DE-19DF 1A20-1A54 1AA0-1AAD A9E0-A9E4 "
        "A9E6-A9EF A9FA-A9FE AA60-AA7A AA7E-AAAF AAB1 AAB5-AAB6 AAB9-AABD AAC0 AAC2 AADB-AADF 11700-1171A "
        "1173A-1173B 1173F "
    ),
    "SEA_EXTEND": (
        "E31 E34-E3A E47-E4E EB1 EB4-EBC EC8-ECD 102B-103E 1056-1059 105E-1060 1062-1064 1067-106D "
        "1071-1074 1082-108D 108F 109A-109D 17B4-17D3 17DD 1A55-1A5E 1A60-1A7C A9E5 AA7B-AA7D AAB0 "
        "AAB2-AAB4 AAB7-AAB8 AABE-AABF AAC1 1171D-1172B "
    ),
    "HANGUL": (
        "1100-11FF 3131-318E A960-A97C AC00-D7A3 D7B0-D7C6 D7CB-D7FB FFA0-FFBE FFC2-FFC7 FFCA-FFCF "
        "FFD2-FFD7 FFDA-FFDC "
    ),
    "ZWJ": ("200D "),
    "KEYCAP": ("20E3 "),
    "LETTER_EMOJI": ("2139 24C2 1F170-1F171 1F17E-1F17F "),
    "HAN": (
        "2E80-2E99 2E9B-2EF3 2F00-2FD5 3007 3021-3029 3038-303A 3400-4DB5 4E00-9FEF F900-FA6D FA70-FAD9 "
        "20000-2A6D6 2A700-2B734 2B740-2B81D 2B820-2CEA1 2CEB0-2EBE0 2F800-2FA1D "
    ),
    "KATAKANA": (
        "3031-3035 309B-309C 30A0-30FA 30FC-30FF 31F0-31FF 32D0-32FE 3300-3357 FF66-FF9D 1B000 1B164-1B167 "
    ),
    "HIRAGANA": ("3041-3096 309D-309F 1B001-1B11E 1B150-1B152 1F200 "),
    "VS15": ("FE0E "),
    "VS16": ("FE0F "),
    "RI": ("1F1E6-1F1FF "),
    "EMOJI_MOD": ("1F3FB-1F3FF "),
    "TAG_SPEC": ("E0020-E007E "),
    "TAG_TERM": ("E007F "),
}

MAX_TOKEN_LENGTH_LIMIT = 1024 * 1024  # StandardTokenizer.MAX_TOKEN_LENGTH_LIMIT


def _cc(*names: str, bmp: bool = False, ascii_only: bool = False) -> str:
    """Body of a regex character class holding the named Lucene classes (BMP part only if bmp;
    ASCII part only if ascii_only, an empty part then standing as U+FFFF, which no ASCII text
    holds: on ASCII text such a class tests every character exactly as the full one does)."""
    top = 0x7F if ascii_only else 0xFFFF if bmp else 0x10FFFF
    out = []
    for name in names:
        for item in _CLASSES[name].split():
            lo, _, hi = item.partition("-")
            first, last = int(lo, 16), int(hi or lo, 16)
            if first > top:
                continue
            out.append(f"\\U{first:08x}-\\U{min(last, top):08x}")
    return "".join(out) if out or not ascii_only else "\\uffff"


def _word_source(bmp: bool, ascii_only: bool = False) -> str:
    """WORD | SOUTHEAST_ASIAN | IDEOGRAPHIC | HIRAGANA rules.  ``re`` tests astral ranges one by
    one, so BMP-only texts get a variant without them (6x faster)."""

    def cc(*names: str) -> str:
        return _cc(*names, bmp=bmp, ascii_only=ascii_only)

    ext = cc("EXTEND", "SEA_EXTEND", "ZWJ", "KEYCAP", "VS15", "VS16", "EMOJI_MOD", "TAG_SPEC", "TAG_TERM")
    e = f"[{ext}]*"  # WB4: X (Extend | Format | ZWJ)* -> X
    lx, he, nu = cc("LETTER", "HANGUL", "LETTER_EMOJI"), cc("HEBREW"), cc("DIGIT", "NUMERIC")
    midlet = cc("MIDLETTER", "MIDNUMLET", "SQ")  # WB6/WB7: (MidLetter | MidNumLetQ) between letters
    midnum = cc("MIDNUM", "MIDNUMLET", "SQ")  # WB11/WB12: (MidNum | MidNumLetQ) between digits
    # One pass of the "+" loop of Lucene's word rule.  A Hebrew letter + quote (tried first: it can
    # only make the match longer); a run of letters (WB5) glued by Mid* chars; a run of digits (WB8)
    # likewise.  A Hebrew letter right after another letter starts a new pass, so it may take a quote.
    hebalt = f"[{he}]{e}(?:[{cc('SQ')}]{e}|[{cc('DQ')}]{e}[{he}]{e})"  # WB7a, WB7b/c
    ahrun = f"[{lx}{he}][{lx}{ext}]*(?:[{midlet}]{e}[{lx}{he}][{lx}{ext}]*)*"  # WB6/7
    numrun = f"[{nu}][{nu}{ext}]*(?:[{midnum}]{e}[{nu}][{nu}{ext}]*)*"  # WB11/12
    # WB9/10: letters and digits abut; WB13: Katakana x Katakana.
    block = f"(?:(?:{hebalt}|{ahrun}|{numrun})+|[{cc('KATAKANA')}][{cc('KATAKANA')}{ext}]*)"
    ux = f"[{cc('EXTENDNUMLET')}]{e}"
    # WB13a/b: ExtendNumLet joins anything; Katakana meets letters/digits only through it.
    word = f"(?>(?:{ux})*){block}(?:(?:{ux})+{block})*(?:{ux})*"
    sea = f"[{cc('SEA', 'SEA_EXTEND')}][{cc('SEA', 'SEA_EXTEND')}{ext}]*"  # LB=Complex_Context runs
    return f"{word}|{sea}|[{cc('HAN')}]{e}|[{cc('HIRAGANA')}]{e}"  # Han, Hiragana: one char each


# EMOJI rule (TR#51 emoji_sequence as the jflex file spells it).  ECP = ZWJ* EmojiChar X* FE0F?
# | ZWJ* ModifierBase X* Modifier X* | Modifier X*; token = ECP ((ZWJ ECP)* | TagSpec+ TagTerm),
# X = ExtFmtZwj minus U+FE0E/U+FE0F.  X contains ZWJ and the modifiers, so it is written as a
# state machine: F (U+FE0F) only closes a segment that has an emoji base; only ZWJ may follow it.
_ZWJ, _F = "\u200d", "\ufe0f"
_X = _cc("EXTEND", "SEA_EXTEND", "ZWJ", "KEYCAP", "EMOJI_MOD", "TAG_SPEC", "TAG_TERM")
_XC = _cc("EXTEND", "SEA_EXTEND", "KEYCAP", "EMOJI_MOD", "TAG_SPEC", "TAG_TERM")  # X without ZWJ
_EB, _MOD = _cc("EMOJI", "LETTER_EMOJI"), _cc("EMOJI_MOD")
_SEG = f"[{_EB}](?:[{_XC}]|{_ZWJ}[{_EB}]?)*"
_CHAIN = (
    f"{_SEG}(?:{_F}(?:{_ZWJ}+{_SEG}|{_ZWJ}[{_MOD}][{_X}]*(?<={_ZWJ}){_SEG}))*"
    f"(?:{_F}(?:{_ZWJ}[{_MOD}][{_X}]*)?)?"
)
_EMOJI_SRC = "|".join(
    (
        f"{_ZWJ}*[{_EB}][{_X}]*{_F}[{_cc('TAG_SPEC')}]+[{_cc('TAG_TERM')}]",  # emoji_tag_sequence
        f"{_ZWJ}*{_CHAIN}",
        f"[{_MOD}][{_X}]*(?:(?<={_ZWJ}){_CHAIN})?",
        f"[{_cc('DIGIT', 'KEYCAP_BASE_SYM')}][{_X}]*{_F}?\u20e3[{_X}]*",  # emoji_keycap_sequence
        f"[{_cc('RI')}][{_X}{_F}\ufe0e]*[{_cc('RI')}][{_X}{_F}\ufe0e]*",  # emoji_flag_sequence
    )
)


def _findall_source(bmp: bool, ascii_only: bool = False) -> str:
    """The word rules for ``findall``: skip non-starters in one possessive run, then a token (the
    group) or a lone ExtendNumLet run / end of text (empty group, dropped), never rescanning."""
    start = _cc(
        "LETTER",
        "HANGUL",
        "LETTER_EMOJI",
        "HEBREW",
        "DIGIT",
        "NUMERIC",
        "KATAKANA",
        "EXTENDNUMLET",
        "SEA",
        "SEA_EXTEND",
        "HAN",
        "HIRAGANA",
        bmp=bmp,
        ascii_only=ascii_only,
    )
    # (not SEA_EXTEND: those marks are Extend, yet can start a SOUTHEAST_ASIAN token themselves)
    ext = _cc(
        "EXTEND",
        "ZWJ",
        "KEYCAP",
        "VS15",
        "VS16",
        "EMOJI_MOD",
        "TAG_SPEC",
        "TAG_TERM",
        "EXTENDNUMLET",
        bmp=bmp,
        ascii_only=ascii_only,
    )
    enl = _cc("EXTENDNUMLET", bmp=bmp, ascii_only=ascii_only)
    return f"[^{start}]*+(?:({_word_source(bmp, ascii_only)})|[{enl}][{ext}]*|\\Z)"


# The full patterns are 200-300 KB of character classes: compiling them costs ~0.35 s, paid by
# every process that tokenizes (each CLI command). ASCII text, most questions, is tokenized by the
# same patterns restricted to ASCII (identical on ASCII text, see _cc; tests/engine/analysis/test_analysis.py),
# compiled at import in ~1 ms; the full ones are compiled on the first text that needs them.
_FINDALL_ASCII = re.compile(_findall_source(bmp=True, ascii_only=True))


@functools.cache
def _findall_bmp() -> re.Pattern[str]:
    return re.compile(_findall_source(bmp=True))


@functools.cache
def _findall_full() -> re.Pattern[str]:
    return re.compile(_findall_source(bmp=False))


_STARTER_CLASSES = (
    # every class that can begin a word/emoji match (a superset is harmless: a failed match skips one)
    "LETTER", "HANGUL", "LETTER_EMOJI", "HEBREW", "DIGIT", "NUMERIC", "KATAKANA", "EXTENDNUMLET",
    "SEA", "SEA_EXTEND", "HAN", "HIRAGANA", "ZWJ", "EMOJI", "EMOJI_MOD", "KEYCAP_BASE_SYM", "RI",
)  # fmt: skip
_WORD_EXT = ("EXTEND", "SEA_EXTEND", "ZWJ", "KEYCAP", "VS15", "VS16", "EMOJI_MOD", "TAG_SPEC", "TAG_TERM")
_BLOCK_START = ("LETTER", "HANGUL", "LETTER_EMOJI", "HEBREW", "DIGIT", "NUMERIC", "KATAKANA")


class _ScanPatterns:
    """Patterns of the token-by-token path (emoji, surrogates, long tokens), compiled on first use."""

    def __init__(self) -> None:
        self.word = re.compile(_word_source(bmp=False))
        self.word_bmp = re.compile(_word_source(bmp=True))  # re tests astral ranges one by one
        self.emoji = re.compile(_EMOJI_SRC)
        self.starter = re.compile(f"[{_cc(*_STARTER_CLASSES)}]")
        others = [c for c in _STARTER_CLASSES if c != "EXTENDNUMLET"]
        self.starter_not_enl = re.compile(f"[{_cc(*others)}]")
        # an ExtendNumLet run as the word rule's atomic (ExtendNumLet Extend*)* consumes it
        self.enl_run = re.compile(f"[{_cc('EXTENDNUMLET')}][{_cc('EXTENDNUMLET', *_WORD_EXT)}]*")
        self.enl = re.compile(f"[{_cc('EXTENDNUMLET')}]")
        self.block_start = re.compile(f"[{_cc(*_BLOCK_START)}]")
        self.emoji_base = re.compile(f"[{_EB}]")


@functools.cache
def _scan_patterns() -> _ScanPatterns:
    return _ScanPatterns()


_SLOW_ASCII = re.compile(f"[{_cc('EMOJI', 'LETTER_EMOJI', 'EMOJI_MOD', 'RI', 'KEYCAP', ascii_only=True)}]")
_SLOW_BMP = re.compile(
    f"[{_cc('EMOJI', 'LETTER_EMOJI', 'EMOJI_MOD', 'RI', 'KEYCAP', bmp=True)}\\ud800-\\udfff]"
)
_SLOW = re.compile(f"[{_cc('EMOJI', 'LETTER_EMOJI', 'EMOJI_MOD', 'RI', 'KEYCAP')}\\ud800-\\udfff]")
_SURROGATE = re.compile("[\\ud800-\\udfff]")
_ASTRAL_OR_HIGH = re.compile("[\\ud800-\\udbff\\U00010000-\\U0010ffff]")


def _u16(s: str) -> int:
    """Length in UTF-16 code units, the unit of Lucene's maxTokenLength."""
    return len(s.encode("utf-16-le", "surrogatepass")) // 2


def _window_end(text: str, start: int, n: int) -> int:
    """End of the scanner buffer: at most n UTF-16 units from the token start (Lucene's
    skeleton.disable.buffer.expansion: a full buffer reads as end of input)."""
    seg = text[start : start + n]
    if not seg or max(seg) <= "\uffff":
        return start + n
    units, end = 0, start
    for ch in seg:
        units += 2 if ch > "\uffff" else 1
        if units > n:
            break
        end += 1
    return end


def _scan(text: str, n: int) -> list[str]:
    """Token-by-token scan: longest of the word and emoji rules, cut at the n-unit buffer.

    Lucene's scanner matches at most ``n`` UTF-16 units from a token's start (its buffer), so a
    start is tried with a match bounded to that window and, when nothing matches there, the
    ``[^]`` rule skips one code point.  Every regex call is bounded by the window or consumes
    what it scans, so the scan is linear in the text (times ``n`` at worst, like Lucene's DFA);
    runs that can never start a token in their window (ExtendNumLet or ZWJ runs) are skipped in
    one step instead of being retried at every position.
    """
    if _SURROGATE.search(text):  # Java sees a UTF-16 char sequence: re-pair split surrogates
        text = text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "surrogatepass")
    out: list[str] = []
    pat = _scan_patterns()
    size = len(text)
    bmp = max(text, default="\0") <= "\uffff"
    run_end = -1  # end of the ExtendNumLet run the last failed start lay in
    pos = 0
    while (m := pat.starter.search(text, pos)) is not None:
        start = m.start()
        window = min(size, start + n) if bmp else _window_end(text, start, n)
        end = start
        for match in ((pat.word_bmp if bmp else pat.word).match, pat.emoji.match):
            hit = match(text, start, window)
            if hit is not None and hit.end() > end:
                end = hit.end()
        if end > start:
            out.append(text[start:end])
            pos = end
            continue
        pos = start + 1  # nothing fits in the buffer: the [^] rule skips one code point
        ch = text[start]
        if ch == _ZWJ:
            # ZWJ* must reach an emoji base inside the window: from the run's end on
            r = start + 1
            while r < size and text[r] == _ZWJ:
                r += 1
            pos = r if r >= size or not pat.emoji_base.match(text, r) else max(pos, r - n + 1)
        elif pat.enl.match(ch):
            if start >= run_end:
                run = pat.enl_run.match(text, start)
                assert run is not None  # text[start] is an ExtendNumLet: the run holds at least that
                run_end = run.end()
            r = run_end
            # a later ExtendNumLet of the run fails too unless its window reaches a block start at r
            reachable = r < size and pat.block_start.match(text, r) is not None
            nxt = max(pos, r - n + 1) if reachable else r
            other = pat.starter_not_enl.search(text, pos, nxt)  # e.g. a modifier inside the run
            pos = other.start() if other is not None else nxt
    return out


def standard_tokenize(text: str, max_token_length: int = 255) -> list[str]:
    """Terms of Lucene's StandardTokenizer, not lowercased.

    A token longer than ``max_token_length`` UTF-16 units is cut where the scanner buffer ends
    and scanning resumes right after the piece (``jumped`` with 5 -> ``jumpe``, ``d``).
    """
    if not 1 <= max_token_length <= MAX_TOKEN_LENGTH_LIMIT:
        raise ValueError(f"maxTokenLength must be in [1, {MAX_TOKEN_LENGTH_LIMIT}], got {max_token_length}")
    if text and "\ud800" <= text[-1] <= "\udbff" and _u16(text) < max_token_length:
        return []  # zzRefill: a read ending in a lone high surrogate at end of input reports EOF
    if max_token_length == 1 and (cut := _ASTRAL_OR_HIGH.search(text)) is not None:
        text = text[: cut.start()]  # a 1-char buffer cannot hold a surrogate pair: zzRefill -> EOF
    if not text:
        return []
    if text.isascii():  # O(1) on str
        if _SLOW_ASCII.search(text) is None:
            tokens = list(filter(None, _FINDALL_ASCII.findall(text)))
            if max(map(len, tokens), default=0) <= max_token_length:
                return tokens
    elif max(text) <= "\uffff":
        if _SLOW_BMP.search(text) is None:
            tokens = list(filter(None, _findall_bmp().findall(text)))  # BMP: code points = UTF-16 units
            if max(map(len, tokens), default=0) <= max_token_length:
                return tokens
    elif _SLOW.search(text) is None:
        tokens = list(filter(None, _findall_full().findall(text)))
        if all(_u16(t) <= max_token_length for t in tokens):
            return tokens
    return _scan(text, max_token_length)


# CharTokenizer family (Lucene's LetterTokenizer, WhitespaceTokenizer) and KeywordTokenizer.
_LETTERS = regex.compile(r"\p{L}+")  # Character.isLetter = general category L*
# Character.isWhitespace: Zs/Zl/Zp except the no-break spaces U+00A0/2007/202F, plus \t-\r, \x1c-\x1f.
_NON_WHITESPACE = re.compile(
    "[^\t\n\x0b\x0c\r\x1c-\x1f \u1680\u2000-\u2006\u2008-\u200a\u2028\u2029\u205f\u3000]+"
)


def _char_tokenize(pattern: re.Pattern | regex.Pattern, text: str, n: int) -> list[str]:
    """Runs of token chars; CharTokenizer ends a token once it holds n UTF-16 units
    (``if (length >= maxTokenLen) break``) and the run goes on in the next token."""
    tokens = pattern.findall(text)
    if max(map(len, tokens), default=0) * 2 <= n or all(_u16(t) <= n for t in tokens):
        return tokens
    out = []
    for t in tokens:
        units = start = 0
        for i, ch in enumerate(t):
            units += 2 if ch > "\uffff" else 1
            if units >= n:
                out.append(t[start : i + 1])
                start, units = i + 1, 0
        if start < len(t):
            out.append(t[start:])
    return out


def letter_tokenize(text: str, max_token_length: int = 255) -> list[str]:
    """Lucene LetterTokenizer: maximal runs of letters."""
    return _char_tokenize(_LETTERS, text, max_token_length)


def whitespace_tokenize(text: str, max_token_length: int = 255) -> list[str]:
    """Lucene WhitespaceTokenizer: maximal runs of non-whitespace."""
    return _char_tokenize(_NON_WHITESPACE, text, max_token_length)


def keyword_tokenize(text: str) -> list[str]:
    """Lucene KeywordTokenizer: the whole input as one token, even when it is empty."""
    return [text]
