(define (problem pick_and_place_simple-cloth-none-countertop-1) (:domain alfred))
