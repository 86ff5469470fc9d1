(define (problem pick_clean_then_place_in_recep-cloth-none-cabinet-4) (:domain alfred))
