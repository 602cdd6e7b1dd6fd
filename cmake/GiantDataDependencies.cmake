# The libraries giant_data links, found through pkg-config (Debian ships no
# CMake package for them): PCRE2 (8-bit code units, GPT-2's pre-tokenizer)
# and SentencePiece (linked only into the giant_sentencepiece module).
# Included by src/giant/data and by the installed GiantConfig.cmake, whose
# consumers link the static giant_data and so these too.
find_package(PkgConfig REQUIRED)
if(NOT TARGET PkgConfig::GIANT_PCRE2)
  pkg_check_modules(GIANT_PCRE2 REQUIRED IMPORTED_TARGET libpcre2-8)
endif()
if(NOT TARGET PkgConfig::GIANT_SENTENCEPIECE)
  pkg_check_modules(GIANT_SENTENCEPIECE REQUIRED IMPORTED_TARGET sentencepiece)
endif()
