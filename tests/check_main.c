/* The test runner: every suite in one binary. `make check` runs it. */
#include <check.h>
#include <stdlib.h>

#include "tensor.h"

Suite *engine_suite(void);
Suite *ops_suite(void);
Suite *reference_suite(void);
Suite *safetensors_suite(void);
Suite *optim_suite(void);
Suite *data_suite(void);
Suite *plot_suite(void);
Suite *model_suite(void);
Suite *attn_linformer_suite(void);
Suite *attn_talking_suite(void);
Suite *attn_positions_suite(void);
Suite *attn_linear_suite(void);
Suite *attn_rope_suite(void);
Suite *train_suite(void);
Suite *options_suite(void);
Suite *zoo_suite(void);
Suite *registry_suite(void);
Suite *grid_suite(void);
Suite *mlp_suite(void);
Suite *lm_cross_entropy_suite(void);
Suite *add_norm_suite(void);
Suite *utf8_suite(void);
Suite *generate_suite(void);
Suite *gemm_suite(void);
Suite *bf16_suite(void);
Suite *fused_suite(void);
Suite *stats_suite(void);
Suite *records_suite(void);
Suite *store16_suite(void);

int main(void) {
    /* Tests are small; one thread keeps them deterministic and quick to fork. */
    engine_set_threads(1);
    SRunner *sr = srunner_create(engine_suite());
    srunner_add_suite(sr, ops_suite());
    srunner_add_suite(sr, reference_suite());
    srunner_add_suite(sr, safetensors_suite());
    srunner_add_suite(sr, optim_suite());
    srunner_add_suite(sr, data_suite());
    srunner_add_suite(sr, plot_suite());
    srunner_add_suite(sr, model_suite());
    srunner_add_suite(sr, attn_linformer_suite());
    srunner_add_suite(sr, attn_talking_suite());
    srunner_add_suite(sr, attn_positions_suite());
    srunner_add_suite(sr, attn_linear_suite());
    srunner_add_suite(sr, attn_rope_suite());
    srunner_add_suite(sr, train_suite());
    srunner_add_suite(sr, options_suite());
    srunner_add_suite(sr, zoo_suite());
    srunner_add_suite(sr, registry_suite());
    srunner_add_suite(sr, grid_suite());
    srunner_add_suite(sr, mlp_suite());
    srunner_add_suite(sr, lm_cross_entropy_suite());
    srunner_add_suite(sr, add_norm_suite());
    srunner_add_suite(sr, utf8_suite());
    srunner_add_suite(sr, generate_suite());
    srunner_add_suite(sr, gemm_suite());
    srunner_add_suite(sr, bf16_suite());
    srunner_add_suite(sr, fused_suite());
    srunner_add_suite(sr, stats_suite());
    srunner_add_suite(sr, records_suite());
    srunner_add_suite(sr, store16_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
