/* config.c: what follows from a ModelConfig. */
#include "config.h"

int model_key_size(const ModelConfig *c) { return c->key_size ? c->key_size : c->d_model / c->heads; }
int model_head_size(const ModelConfig *c) { return c->head_size ? c->head_size : c->d_model / c->heads; }
