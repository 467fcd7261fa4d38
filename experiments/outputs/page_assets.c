/* page_assets.c: page/page.js and page/page.css built into the commands as
 * page_js and page_css (NUL-terminated), so that a page is written from the
 * command alone. They stay files of their own, read and checked as what they
 * are; the assembler's .incbin copies them in (the Makefile makes this
 * object depend on them). */
__asm__(".section .rodata\n"
        ".global page_js\n"
        ".type page_js, @object\n"
        "page_js:\n"
        ".incbin \"experiments/outputs/page/page.js\"\n"
        ".byte 0\n"
        ".global page_css\n"
        ".type page_css, @object\n"
        "page_css:\n"
        ".incbin \"experiments/outputs/page/page.css\"\n"
        ".byte 0\n"
        ".previous\n");
