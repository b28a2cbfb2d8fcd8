/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * libFuzzer target for a cell's outputs (outputs.c): whatever a cell writes to its outputs
 * channel, outputs_parse() keeps only records of the documented shape (each output an object
 * with a "type" and a "data" object holding a string "text/plain"), and the result encodes
 * them (result_to_json_object()) and words its notes without a crash, a leak or a read past the
 * input.
 *
 *   meson setup build-fuzz -Dfuzz=true --native-file tests/fuzz/clang.ini
 *   ninja -C build-fuzz tests/fuzz/fuzz-outputs && build-fuzz/tests/fuzz/fuzz-outputs
 */
#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "nsbox.h"
#include "outputs.h"
#include "result.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void ignore(const char *sentence, void *userdata)
{
    (void)sentence;
    (void)userdata;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    json_t *outputs = NULL, *error = NULL, *o, *j;
    struct outputs_stats st;
    size_t i;
    struct nsbox_result r = {.status = NSBOX_STATUS_EXITED, .cell = true, .outputs_limit = 4096};

    if (outputs_parse((const char *)data, size, &outputs, &error, &st) < 0)
        return 0;
    if (json_array_size(outputs) != st.n_outputs)
        abort();
    json_array_foreach(outputs, i, o)
        if (!json_is_string(json_object_get(json_object_get(o, "data"), "text/plain")))
            abort();
    if (error && !json_is_array(json_object_get(error, "traceback")))
        abort();
    json_decref(outputs);
    json_decref(error);

    r.outputs = malloc(size + 1);
    r.out.data = strdup("");
    r.err.data = strdup("");
    if (!r.outputs || !r.out.data || !r.err.data)
        abort();
    memcpy(r.outputs, data, size);
    r.outputs[size] = '\0';
    r.outputs_size = size;
    r.outputs_total = size;
    j = result_to_json_object(&r);
    json_decref(j);
    (void)nsbox_result_notes(&r, ignore, NULL);
    free(r.outputs);
    free(r.out.data);
    free(r.err.data);
    return 0;
}
